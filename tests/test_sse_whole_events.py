"""SseParser's one-split path (`_whole_events`, reads that are runs of one-line `data: ` events) against the WHATWG
algorithm of tests/test_sse_spec.py, on streams generated near that shape: mostly such events, with the few
bytes that must send a read to the line-by-line path (a second data line, a comment, a third LF, `data:` without
the space, a CR, a field that only starts like `data`), split anywhere into reads."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from loadgen.client.sse import SseParser
from tests.test_sse_spec import BOUNDED, VALUE, split, whatwg_events

pytestmark = pytest.mark.unit

ODD = st.sampled_from(["data: a\ndata: b\n\n", ": ping\n\n", "\n", "data:x\n\n", "data\n\n", "datax: y\n\n",
                       "data: a\r\n\r\n", "data: c\r\r", "data: \n\n", "id: 1\ndata: d\n\n", "data: e\n", "data: "])


@st.composite
def near_whole(draw) -> bytes:
    """Events as servers write them (`data: <value>` and a blank line), now and then one of `ODD`."""
    parts = []
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 5)) == 0:
            parts.append(draw(ODD))
        else:
            parts.append("data: " + draw(VALUE) + "\n\n")
    if draw(st.booleans()):
        parts.append("data: " + draw(VALUE))  # an unfinished last event
    return "".join(parts).encode()


def ours(reads: list[bytes]) -> list[str]:
    parser = SseParser()
    return [e.decode("utf-8", "replace") for r in reads for e in parser.feed(r)]


@BOUNDED
@given(near_whole(), st.lists(st.integers(0, 300), max_size=8))
@example(b"data: a\n\ndata: b\n\ndata: c", [])
@example(b"data: a\n\n\ndata: b\n\n", [])
@example(b"data: a\n\ndata: b\ndata: c\n\n", [])
@example(b"data: a\n\n: x\n\ndata: b\n\n", [])
@example(b"data: a\n", [8])
def test_near_whole_streams_give_the_events_of_the_whatwg_algorithm(stream, cuts):
    assert ours(split(stream, cuts)) == whatwg_events(stream)


@pytest.mark.parametrize("buf, events, held", [
    (b"data: a\n\ndata: b\n\n", [b"a", b"b"], b""),
    (b"data: a\n\ndata: {\"x\":", [b"a"], b"data: {\"x\":"),
    (b"data: \n\ndata: [DONE]\n\n", [b"", b"[DONE]"], b""),
])
def test_server_shaped_reads_take_one_split(buf, events, held):
    parser = SseParser()
    parser._start = False
    assert parser._whole_events(buf) == events
    assert parser._buf == held


@pytest.mark.parametrize("buf", [
    b"data: a\n\n\ndata: b\n\n",  # a third LF: a blank line of its own
    b"data: a\ndata: b\n\n",  # two data lines in one event
    b"data: a\n\n: ping\n\n",  # a comment
    b"data:a\n\n",  # no space: the value is read line by line
    b"datax: a\n\n",
    b"data: a",  # no event ended in this read
])
def test_other_reads_are_read_line_by_line(buf):
    parser = SseParser()
    assert parser._whole_events(buf) is None
    assert parser._buf == b""
