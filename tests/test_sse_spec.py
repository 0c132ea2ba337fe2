"""SseParser against the WHATWG event-stream algorithm (HTML Living Standard, "Server-sent events", 9.2.6
"Interpreting an event stream"), written out below as a small reference: generated streams — LF, CR and CRLF
line ends, comments, `data:` with and without the space, a field name without a colon, multi-line data, other
fields, a BOM, events split anywhere across reads — give the same events' data from both.

The reference decodes UTF-8 first as the standard does; streams are generated as text, so that decoding is
exact and the parser's bytes can be compared after decoding. The unit tier runs a bounded number of examples;
`benchmarks/fuzz_wire.py` runs them longer. Minimised failures are tests at the end."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadgen.client.sse import SseParser

pytestmark = pytest.mark.unit

# bounded in the unit tier; benchmarks/fuzz_wire.py sets WIRE_FUZZ_EXAMPLES for a longer run
BOUNDED = settings(max_examples=int(os.environ.get("WIRE_FUZZ_EXAMPLES", "300")), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])


def whatwg_events(stream: bytes) -> list[str]:  # noqa: C901 (the standard's steps, one by one, as it reads)
    """The data of each dispatched event, by the standard's steps: decode UTF-8 (one leading BOM dropped);
    split lines at CRLF, LF or CR; a blank line dispatches (data buffer empty: nothing; one trailing LF of the
    buffer removed); a line starting with ":" is a comment; else field name up to the first ":", value after
    it with one leading space removed (no colon: the whole line is the name, the value empty); field "data"
    appends value + LF to the data buffer; other fields carry no data. An unfinished event at the end of the
    stream is discarded."""
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines, line, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch in "\r\n":
            lines.append("".join(line))
            line = []
            if ch == "\r" and text[i + 1:i + 2] == "\n":
                i += 1
        else:
            line.append(ch)
        i += 1
    events, data = [], ""
    for line in lines:  # the unfinished last line (in `line`) is never processed
        if line == "":
            if data:
                events.append(data[:-1] if data.endswith("\n") else data)
            data = ""
        elif line.startswith(":"):
            continue
        else:
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data += value + "\n"
    return events


def ours(reads: list[bytes]) -> list[str]:
    parser = SseParser()
    return [e.decode("utf-8", "replace") for r in reads for e in parser.feed(r)]


EOL = st.sampled_from(["\n", "\r", "\r\n"])
VALUE = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)
FIELD = st.sampled_from(["data", "data", "data", "event", "id", "retry", "dat", "datax", "Data", ""])


@st.composite
def sse_line(draw) -> str:
    kind = draw(st.sampled_from(["field", "field", "bare", "comment", "blank", "spaced"]))
    if kind == "field":
        return draw(FIELD) + ":" + draw(st.sampled_from(["", " ", "  "])) + draw(VALUE)
    if kind == "bare":  # a field name without a colon: the value is empty
        return draw(FIELD)
    if kind == "comment":
        return ":" + draw(VALUE)
    if kind == "spaced":
        return " data: " + draw(VALUE)  # a leading space makes the field name " data": no data
    return ""


@st.composite
def streams(draw) -> bytes:
    text = "".join(draw(sse_line()) + draw(EOL) for _ in range(draw(st.integers(0, 14))))
    if draw(st.booleans()):
        text += draw(sse_line())  # an unfinished last line
    return (("\ufeff" if draw(st.integers(0, 4)) == 0 else "") + text).encode()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


@BOUNDED
@given(streams(), st.lists(st.integers(0, 400), max_size=12))
@example("\ufeffdata: a\n\n".encode(), [])
@example("\ufeffdata: a\n\n".encode(), [1, 2])
def test_the_parser_gives_the_events_of_the_whatwg_algorithm(stream, cuts):
    assert ours(split(stream, cuts)) == whatwg_events(stream)


@BOUNDED
@given(streams())
def test_one_byte_reads_give_the_same_events(stream):
    assert ours(split(stream, list(range(len(stream))))) == whatwg_events(stream)


# ---- minimised failures the fuzzer found ----------------------------------------------------------------------
@pytest.mark.parametrize("stream, events", [
    ("\ufeffdata: a\n\n".encode(), ["a"]),  # a BOM before the first field: the event was lost
    (b"\xef\xbb", []),  # half a BOM, then the stream ends
    ("\ufeff\ufeffdata: a\n\n".encode(), []),  # only one BOM is dropped: the second is part of the field name
])
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_what_the_fuzzer_found(stream, events, reads):
    assert whatwg_events(stream) == events
    assert ours([stream] if reads == "whole" else split(stream, list(range(len(stream))))) == events
