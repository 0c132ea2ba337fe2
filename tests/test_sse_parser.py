"""SseParser: tables of inputs, and properties over generated streams — any split into reads, any line ending,
comments and other fields anywhere give the same events. Samples in tests/fixtures/streams are the wire
formats of SGLang 0.5.23 (copied from the project's shared samples)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.client.sse import SseParser

pytestmark = pytest.mark.unit

SAMPLES = sorted((Path(__file__).parent / "fixtures" / "streams").glob("*.txt"))


def parse(*reads: bytes) -> list[bytes]:
    p = SseParser()
    return [e for r in reads for e in p.feed(r)]


TABLE = [
    ("one event", [b"data: x\n\n"], [b"x"]),
    ("no space after colon", [b"data:x\n\n"], [b"x"]),
    ("only one leading space is dropped", [b"data:  x\n\n"], [b" x"]),
    ("empty data", [b"data:\n\n"], [b""]),
    ("field without colon", [b"data\n\n"], [b""]),
    ("multi-line data joined by LF", [b"data: a\ndata: b\n\n"], [b"a\nb"]),
    ("two events in one read", [b"data: a\n\ndata: b\n\n"], [b"a", b"b"]),
    ("event split mid-line", [b"da", b"ta: hel", b"lo\n", b"\n"], [b"hello"]),
    ("CRLF", [b"data: a\r\n\r\ndata: b\r\n\r\n"], [b"a", b"b"]),
    ("CRLF split between CR and LF", [b"data: a\r", b"\n\r", b"\n"], [b"a"]),
    ("bare CR", [b"data: a\r\rdata: b\r\r"], [b"a", b"b"]),
    ("CR at the end of a read then data", [b"data: a\r", b"\rdata: b\r\r"], [b"a", b"b"]),
    ("comments are keep-alives", [b": ping\n\ndata: a\n: inside\n\n:\n\n"], [b"a"]),
    ("other fields ignored", [b"event: message\nid: 7\nretry: 100\ndata: a\n\n"], [b"a"]),
    ("blank lines without data dispatch nothing", [b"\n\n\n"], []),
    ("unfinished event is held back", [b"data: a\n"], []),
    ("colon in the value kept", [b'data: {"a": "b:c"}\n\n'], [b'{"a": "b:c"}']),
    ("DONE", [b"data: [DONE]\n\n"], [b"[DONE]"]),
]


@pytest.mark.parametrize("reads,events", [(r, e) for _, r, e in TABLE], ids=[t[0] for t in TABLE])
def test_table(reads, events):
    assert parse(*reads) == events


def test_the_unfinished_event_is_held_until_it_ends():
    p = SseParser()
    assert p.feed(b"data: a\n\ndata: {\"cho") == [b"a"]
    assert p.feed(b'ices": []}\n') == []
    assert p.feed(b"\n") == [b'{"choices": []}']


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_samples_byte_by_byte(path):
    data = path.read_bytes()
    whole = parse(data)
    assert whole[-1] == b"[DONE]" and len(whole) == data.count(b"\n\n")
    assert parse(*[data[i:i + 1] for i in range(len(data))]) == whole


# ---- properties ----------------------------------------------------------------------------------------------
line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=30)
event = st.lists(line_text, min_size=1, max_size=4)
noise = st.sampled_from([b": keep-alive", b":", b"event: delta", b"id: 42", b"retry: 1000"])


@st.composite
def streams(draw):
    """(events as lists of data lines, the bytes of a stream carrying them with noise and any line ending)."""
    events = draw(st.lists(event, max_size=6))
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = []
    for lines in events:
        if draw(st.booleans()):  # a keep-alive block between events dispatches nothing
            out += [b": ping", b""]
        for text in lines:
            if draw(st.booleans()):
                out.append(draw(noise))
            space = draw(st.sampled_from([b"", b" "])) if not text.startswith(" ") else b" "
            out.append(b"data:" + space + text.encode())
        out.append(b"")
    raw = b"".join(line + eol for line in out)
    return events, raw


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(raw)) for c in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)])]


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_split_any_line_ending_same_events(stream, cuts):
    events, raw = stream
    expected = [b"\n".join(t.encode() for t in lines) for lines in events]
    assert parse(raw) == expected
    assert parse(*split(raw, cuts)) == expected


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SAMPLES), st.sampled_from([b"\r\n", b"\r"]),
       st.lists(st.integers(min_value=0, max_value=5000), max_size=20))
def test_samples_with_other_line_endings_and_splits(path, eol, cuts):
    data = path.read_bytes()
    converted = data.replace(b"\n", eol)
    assert parse(*split(converted, cuts)) == parse(data)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SAMPLES), st.integers(min_value=1, max_value=6))
def test_samples_merged_into_fewer_reads(path, parts):
    # a server that batches events (one TCP read holding several) yields the same events
    data = path.read_bytes()
    size = -(-len(data) // parts)
    assert parse(*[data[i:i + size] for i in range(0, len(data), size)]) == parse(data)
