"""The event template read straight from a chunked HTTP body (`StreamRecorder.read_chunks`, offered to the
connection as its handler's `chunk_reader`) against the full parse: the generated streams of
tests/test_event_template.py, framed as HTTP/1.1 chunks (mostly one SSE event a chunk, as servers write them; else
several events in one chunk, an event split over chunks, size lines in upper case, with leading zeros or an
extension, a size that does not match its data), cut into reads anywhere and where chunks end, go through a real
`Connection`. The records, times included, are identical to the full parse's (`learns_left=0`, no chunk reader):
the fast path reads a chunk only when it is byte for byte the template's event, and declines anything else to the
decoder and the parser.
"""

from __future__ import annotations

import re
from unittest.mock import patch

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from benchmarks.h1_parse_cost import Pool, Transport
from loadgen.client import event_template, h1_connection
from loadgen.client import recorder as recorder_module
from loadgen.client.h1_connection import Connection
from loadgen.client.recorder import StreamRecorder
from loadgen.client.sse import SseParser
from loadgen.names import Api, Outcome
from loadgen.record import CellKey, Record
from tests.test_event_template import (
    BOUNDED,
    SHAPES,
    WORDS,
    Head,
    change,
    encode,
    openai_event,
    sg,
    split,
    stream_ids,
    streams,
    usage,
)

pytestmark = pytest.mark.unit

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class Handler:
    """What `h1_sender.StreamHandler` is to the connection, without a future: the record's ending is kept."""

    def __init__(self, recorder: StreamRecorder, whole_chunks: bool):
        self.recorder = recorder
        self.chunk_reader = recorder if whole_chunks else None
        self.ending: tuple | None = None
        self.ended = False

    def head(self, status, headers, now):
        return self.recorder.feed

    def end(self, now):
        self.ended = True

    def fail(self, kind, message, now):
        self.ending = (kind, message)


def record(api: Api, reads: list[bytes], fast: bool) -> dict:
    """The record of a response read through a `Connection`, the reads arriving at 1000, 2000, … ns."""
    rec = Record("run", CellKey(60, 1), 0)
    recorder = StreamRecorder(rec, api)
    recorder.state.learns_left = recorder.state.learns_left if fast else 0
    handler = Handler(recorder, fast)
    conn = Connection(Pool())
    conn.connection_made(Transport())
    conn.start(b"", handler)
    clock = [0]
    with patch.object(h1_connection, "monotonic_ns", lambda: clock[0]):
        for i, data in enumerate(reads):
            clock[0] = 1000 * (i + 1)
            try:
                conn.data_received(data)  # the connection turns a `ValueError` into the handler's ending
            except Exception as exc:  # noqa: BLE001 (the full parse's own failures: both paths must raise them alike)
                handler.ending = (Outcome.CONNECTION_ERROR, f"raised {type(exc).__name__}: {exc}")
            if handler.ending or handler.ended:
                break
    rec.t_end_ns = 1
    outcome, error = handler.ending or (None, None)
    if not (handler.ending or handler.ended):
        outcome, error = Outcome.CONNECTION_ERROR, "the reads ended before the response"
    return recorder.finish(outcome, error).to_dict()


def chunk(data: bytes, size_line: bytes | None = None) -> bytes:
    return (size_line or b"%x" % len(data)) + b"\r\n" + data + b"\r\n"


@st.composite
def chunked(draw, body: bytes) -> bytes:
    """`body` (SSE bytes) as a chunked body: each event its own chunk, but for what is drawn otherwise."""
    events = [e for e in re.split(rb"(?<=\n\n)", body) if e] or [b""]
    out, i = [], 0
    while i < len(events):
        how = draw(st.sampled_from(["one"] * 14 + ["two", "split", "upper", "zeros", "ext", "bad-size", "empty"]))
        data = events[i]
        if how == "two" and i + 1 < len(events):
            data, i = data + events[i + 1], i + 1
        if how == "split" and len(data) > 1:
            k = draw(st.integers(1, len(data) - 1))
            out.append(chunk(data[:k]))
            data = data[k:]
        size_line = {"upper": b"%X" % len(data), "zeros": b"00%x" % len(data), "ext": b"%x;x=1" % len(data),
                     "bad-size": b"%x" % (len(data) + draw(st.sampled_from([-1, 1, 3])))}.get(how)
        out.append(chunk(data, size_line) if data else b"")
        i += 1
    return b"".join(out) + b"0\r\n\r\n"


@st.composite
def template_runs(draw) -> tuple[Api, bytes]:
    """Long runs of plain content events with running usage, as each OpenAI shape writes them, among few others:
    a text with an escape, reasoning, a step unlike the last, a count jump, a field changed, `sglext`, an event
    without usage; then the finish, the usage and [DONE]. What the template reads most of."""
    shape = draw(st.sampled_from([s for s in SHAPES if s.api is not Api.SGLANG_GENERATE]))
    head, chat = Head(prompt=draw(st.integers(0, 3000)), **draw(stream_ids())), shape.api is Api.OPENAI_CHAT
    ct, step, out = 0, draw(st.integers(1, 4)), []
    if chat:
        out.append(openai_event(shape, head, {"role": "assistant", "content": ""}, None, None))
    for _ in range(draw(st.integers(2, 40))):
        kind = draw(st.sampled_from(["plain"] * 20 + ["escape", "reasoning", "step", "jump", "change", "spec",
                                                      "no-usage"]))
        step = draw(st.integers(0, 5)) if kind == "step" else step
        ct += step + (draw(st.sampled_from([1, 10**6, 10**18])) if kind == "jump" else 0)
        if kind == "change":
            change(draw, head)
        if kind == "spec":
            out.append({"id": head.rid, "choices": [], "sglext": {"spec_tokens_details": {"spec_verify_ct": ct}}})
            continue
        text = draw(st.sampled_from(['a"b', "\\n", "\n"])) if kind == "escape" else draw(WORDS)
        value = {"reasoning_content": text} if kind == "reasoning" else {"content": text}
        use = None if kind == "no-usage" else usage(shape, head, ct)
        out.append(openai_event(shape, head, value if chat else text, None, use))
    out.append(openai_event(shape, head, {} if chat else "", "stop", usage(shape, head, ct)))
    events = [encode(e, "plain") for e in out] + [b"[DONE]"]
    return shape.api, b"".join(b"data: " + e + b"\n\n" for e in events)


def both(api: Api, body: bytes, cuts: list[int]) -> int:
    """Asserts that both paths give the same record; returns how many events the template read from chunks."""
    reads, read = split(HEAD + body, cuts), [0]
    real = recorder_module.read_chunked_template

    def counting(state, buf, pos, tokens):
        end = real(state, buf, pos, tokens)
        read[0] += state.run_chunks if end > pos else 0
        return end

    with patch.object(recorder_module, "read_chunked_template", counting):
        fast = record(api, reads, True)
    assert fast == record(api, reads, False)
    return read[0]


@BOUNDED
@given(st.data(), st.one_of(streams(), template_runs()), st.lists(st.integers(0, 6000), max_size=8),
       st.lists(st.integers(0, 60), max_size=8))
def test_chunks_read_by_the_template_are_what_the_full_parse_reads(data, stream, cuts, at_ends):
    api, sse = stream
    if data.draw(st.booleans()):  # every event framed as servers frame them: the chunks the template may read
        sse = b"".join(b"data: " + e + b"\n\n" for e in SseParser().feed(sse))
    body = data.draw(chunked(sse))
    ends = [len(HEAD) + m.end() for m in re.finditer(rb"\r\n(?=[0-9a-fA-F]+(?:;x=1)?\r\n)", body)] or [0]
    read = both(api, body, cuts + [ends[i % len(ends)] for i in at_ends])
    event(f"events the template read from chunks: {'0' if not read else '1-3' if read < 4 else '4+'}")


def run(n: int, first: int = 1) -> bytes:
    """`n` SGLang-like chat events with running usage, each its own chunk, the last one finishing."""
    return b"".join(chunk(sg(b" w%d" % i, i, b'"length"' if i == first + n - 1 else b"null"))
                    for i in range(first, first + n)) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


@pytest.mark.parametrize("reads", ["whole", "1-byte", "chunks"])
def test_a_stream_of_template_chunks_is_read_by_the_template(reads):
    body = run(40)
    cuts = {"whole": [], "1-byte": list(range(len(HEAD) + len(body))),
            "chunks": [len(HEAD) + m.end() for m in re.finditer(rb"\n\n\r\n", body)]}[reads]
    read = both(Api.OPENAI_CHAT, body, cuts)
    rec = record(Api.OPENAI_CHAT, split(HEAD + body, cuts), True)
    assert rec["outcome"] == "ok" and rec["chunks"] == 40 and rec["chunk_tokens"] == [1] * 40
    # the first event learns the template; of the rest, all but the finishing one are read from the chunks (one
    # byte a read: a chunk is never whole in a read, the template reads none)
    assert read == (0 if reads == "1-byte" else 38)


@pytest.mark.parametrize("bad", [b"zz", b"-1", b"1" * 20])
def test_a_bad_size_line_after_template_chunks_fails_the_response_after_them(bad):
    good = run(10)[:-len(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")]
    body = good + bad + b"\r\n" + sg(b"x", 11) + b"\r\n0\r\n\r\n"
    rec = record(Api.OPENAI_CHAT, [HEAD + body], True)
    assert rec == record(Api.OPENAI_CHAT, [HEAD + body], False)
    # the chunks before the bad line are the response's, as the events before a bad event are
    assert rec["outcome"] == "protocol_error" and rec["chunks"] == 10 and "chunk size" in rec["error"]


def test_a_chunk_whose_size_does_not_match_its_data_fails_after_the_chunks_before_it():
    good = run(10)[:-len(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")]
    bad = sg(b"x", 11)
    body = good + b"%x\r\n" % (len(bad) - 1) + bad + b"\r\n0\r\n\r\n"
    rec = record(Api.OPENAI_CHAT, [HEAD + body], True)
    assert rec == record(Api.OPENAI_CHAT, [HEAD + body], False)
    assert rec["outcome"] == "protocol_error" and rec["chunks"] == 10 and "CRLF" in rec["error"]


def test_a_chunk_too_short_for_the_template_is_not_read():
    """An event whose text's opening and closing quote are one byte (`"content":"},…`): the chunk ends where the
    predicted rest does, but the rest would begin inside the head (invalid JSON: the full parse refuses it)."""
    first, second = sg(b"a", 1), sg(b"", 2)
    overlapped = second.replace(b'"content":""}', b'"content":"}')
    body = chunk(first) + chunk(overlapped) + b"0\r\n\r\n"
    rec = record(Api.OPENAI_CHAT, [HEAD + body], True)
    assert rec == record(Api.OPENAI_CHAT, [HEAD + body], False)
    assert rec["outcome"] == "protocol_error" and rec["chunks"] == 1


def ends_of_chunks(body: bytes) -> list[int]:
    """Where each chunk of `body` ends in the response (after its CRLF)."""
    return [len(HEAD) + m.end() for m in re.finditer(rb"\n\n\r\n", body)]


@pytest.mark.parametrize("before_end", [2, 1, 5, 40])
def test_a_chunk_a_read_ends_inside_keeps_the_times_of_the_full_parse(before_end):
    """Found by the fuzzer: a read that ends after a chunk's data but before its CRLF has the event whole, and
    its time is that read's; only a chunk whose part here ends no line (5 and 40 bytes before its end: inside the
    event) waits for the next read, which changes no time."""
    body = run(12)
    cut = ends_of_chunks(body)[6] - before_end
    read = both(Api.OPENAI_CHAT, body, [cut])
    rec = record(Api.OPENAI_CHAT, split(HEAD + body, [cut]), True)
    assert rec["chunks"] == 12 and rec["chunk_gaps_ns"].count(1000) == 1
    # the first event learns, the finishing one is parsed; the rest from chunks, on both reads, but for the one
    # whose data the first read ends with (read by the parser in the first read, as the full parse reads it)
    assert read == (9 if before_end <= 2 else 10)


def test_a_chunk_whose_size_is_wrong_gives_none_of_its_data_when_its_rest_comes_later():
    """Found by the fuzzer: a size line that ends a read, its chunk's data (a size too small) in the next read:
    the decoder fails the response before any of that chunk's data reaches the reader, on either path."""
    good = run(6)[:-len(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")]
    bad = sg(b"", 7, b'"stop"')
    body = good + b"%x\r\n" % (len(bad) - 2) + bad + b"\r\n0\r\n\r\n"
    cut = len(HEAD) + len(good) + len(b"%x\r\n" % (len(bad) - 2))
    both(Api.OPENAI_CHAT, body, [cut])
    rec = record(Api.OPENAI_CHAT, split(HEAD + body, [cut]), True)
    assert rec["outcome"] == "protocol_error" and rec["completion_tokens"] == 6 and rec["chunks"] == 6


def test_a_rest_two_streams_learnt_is_formatted_once_a_count(monkeypatch):
    """`event_template.known_rests`: none for the first stream of a rest (no cache for prompts that all differ), a
    cache from the second one on, whose entries are what `rest_for` gives with the chunk's CRLF; bounded."""
    from loadgen.client.event_template import known_rests, rest_for
    monkeypatch.setattr(event_template, "KNOWN_RESTS", {})
    first, second = (b"h1", b',"n":%d,"t":%d}', 0, 7, b"", b""), (b"h2", b',"n":%d,"t":%d}', 0, 7, b"", b"")
    assert known_rests(first) is None and known_rests(first) is None
    rests = known_rests(second)
    assert rests == {} and known_rests(first) is rests
    body = run(20)
    reads = split(HEAD + body, [])
    assert record(Api.OPENAI_CHAT, reads, True) == record(Api.OPENAI_CHAT, reads, False)
    assert record(Api.OPENAI_CHAT, reads, True) == record(Api.OPENAI_CHAT, reads, False)  # the second stream caches
    (cached,) = [r for r in event_template.KNOWN_RESTS.values() if isinstance(r, dict) and r]
    key = next(k for k, r in event_template.KNOWN_RESTS.items() if r is cached)
    assert all(rest == rest_for((b"", *key, b"", b""), ct) + b"\r\n" for ct, rest in cached.items())
    for i in range(40):
        known_rests((b"h", b"%d" + b"x" * i, 0, None, b"", b""))
    assert len(event_template.KNOWN_RESTS) <= event_template.MAX_KNOWN_TEMPLATES


@pytest.mark.parametrize("cuts", [[], "1-byte"])
def test_a_count_that_goes_down_is_read_by_the_full_parse(cuts):
    """Found by the fuzzer (a count written `1e2`, read as 100.0, then 0): an event without text whose count is
    lower than the last adds its (negative) step to the chunk before, as the full parse reads it; the template
    read it as no chunk and lost the step."""
    body = b"".join(chunk(e) for e in (sg(b"a", 1), sg(b"b", 5), sg(b"", 2), sg(b"c", 3, b'"stop"'),
                                       b"data: [DONE]\n\n")) + b"0\r\n\r\n"
    cut = list(range(len(HEAD) + len(body))) if cuts == "1-byte" else cuts
    both(Api.OPENAI_CHAT, body, cut)
    rec = record(Api.OPENAI_CHAT, split(HEAD + body, cut), True)
    assert rec["chunk_tokens"] == [1, 1, 1] and rec["completion_tokens"] == 3


def test_the_decoder_gives_a_stream_its_chunks_one_by_one_only_while_there_is_something_to_learn(monkeypatch):
    """The role chunk and the first content chunk one by one (the template is learnt from the second), the run of
    the template read from the chunks, the finish chunk that the run declined, then (nothing is left to learn)
    the rest at once: four reads of the parser in all, and the record the same as without the chunk reader. A later
    stream of the same server takes the template at its role chunk: its first content chunk is read by the run."""
    events = [sg(b"", 0).replace(b'"content":""', b'"role":"assistant","content":""')]
    events += [sg(b"w%d" % i, i) for i in range(1, 9)] + [sg(b"w9", 9, b'"length"')]
    events += [b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":9}}\n\n',
               b'data: {"id":"c","choices":[],"sglext":{"spec_tokens_details":{"spec_verify_ct":4}}}\n\n',
               b"data: [DONE]\n\n"]
    reads = [HEAD + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"]
    fed = []
    original = StreamRecorder.feed
    with patch.object(StreamRecorder, "feed", lambda self, data, now: fed.append(data) or original(self, data, now)):
        assert record(Api.OPENAI_CHAT, reads, True) == record(Api.OPENAI_CHAT, reads, False)
        monkeypatch.setattr(event_template, "FAMILIES", [])
        fed.clear()
        first = record(Api.OPENAI_CHAT, reads, True)
        assert fed == [events[0], events[1], events[9], b"".join(events[10:])]
        fed.clear()
        assert record(Api.OPENAI_CHAT, reads, True) == first
        assert fed == [events[0], events[9], b"".join(events[10:])]
