"""The event template (loadgen/client/event_template.py) against the full parse: generated streams read with the
template on and off give the same state after every event and the same records.

Streams are made of every engine's event shapes (SGLang, vLLM and llama.cpp chat and completions, SGLang's
`/generate`; key orders as the servers write them: shared/samples, copied in fixtures/streams): role, content and
reasoning chunks with running usage or without, texts with quotes, backslashes, control characters and any
Unicode, written raw or escaped, `sglext`, finish and usage chunks, error events, the shape changing mid-stream (a
field added, the model or `created` changed, a count that is not the running one, the usage gone), raw bytes put
where the text or a count is written or after the event (invalid UTF-8, control characters, leading zeros, signs,
floats, integers beyond 64 bits), SSE framing variants (CR, CRLF, comments, another field, split `data:` lines),
cut at random reads and where events end. The reference is the full parse (`learns_left=0`). The unit tier runs
a bounded number of examples; `benchmarks/fuzz_wire.py` runs them longer. What the fuzzer found is a test at the
end.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loadgen.client import event_template
from loadgen.client.event_template import family_template, learn, plain_text, remember_family, sibling
from loadgen.client.recorder import MORE, StreamRecorder, one_line
from loadgen.client.sse import SseParser
from loadgen.client.stream import STATES, ChatState, CompletionsState, StreamState
from loadgen.names import Api, Outcome
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit

# bounded in the unit tier; benchmarks/fuzz_wire.py sets WIRE_FUZZ_EXAMPLES for a longer run
BOUNDED = settings(max_examples=int(os.environ.get("WIRE_FUZZ_EXAMPLES", "300")), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STREAMS = Path(__file__).parent / "fixtures" / "streams"
TEXT_MARK, COUNT_MARK = "@@text@@", 987_654_321  # where raw bytes replace the written text or count


# ---- both paths ------------------------------------------------------------------------------------------------
class _Counting:
    """Counts the events the full parse read (the rest were read by the template)."""

    parsed = 0

    def _parse(self, payload: bytes) -> bool:
        _Counting.parsed += 1
        return super()._parse(payload)  # type: ignore[misc]


class CountingChat(_Counting, ChatState):
    pass


class CountingCompletions(_Counting, CompletionsState):
    pass


COUNTING = {Api.OPENAI_CHAT: CountingChat, Api.OPENAI_COMPLETIONS: CountingCompletions}


def view(state: StreamState) -> tuple:
    """Everything a state says after an event (its answer list copied)."""
    return (state.content, state.new_tokens, state.reasoning_event, state.done, state.finished, state.prompt_tokens,
            state.completion_tokens, state.spec, state.cached_tokens, state.error, state.running_counts,
            state._running_tokens, state._uncounted, None if state.answer is None else list(state.answer),
            state.reasoning_tokens, state.incomplete_reason())


def states(api: Api, events: list[bytes], fast: bool, answer: bool = False) -> list:
    """The state after each event (or what the event raised); the full parse when not `fast`."""
    cls = COUNTING.get(api, STATES[api]) if fast else STATES[api]
    state = cls(api=api, learns_left=8 if fast else 0)
    if answer:
        state.answer = []
    seen: list = []
    for payload in events:
        try:
            said = state.feed(payload)
        except Exception as exc:  # noqa: BLE001 (what the event raised is part of what is compared)
            seen.append(("raised", type(exc).__name__, str(exc)))
            continue
        seen.append((said, view(state)))
    return seen


def record(api: Api, reads: list[bytes], fast: bool, session: bool = False) -> dict:
    """The record of a stream read as the senders read it: a `ProtocolError` ends it as a protocol error."""
    rec = Record("run", CellKey(60, 1), 0, session=0 if session else None)
    recorder = StreamRecorder(rec, api)
    recorder.state.learns_left = recorder.state.learns_left if fast else 0
    outcome = error = None
    for i, data in enumerate(reads):
        try:
            said = recorder.feed(data, 1_000 * (i + 1))
        except ValueError as exc:
            outcome, error = Outcome.PROTOCOL_ERROR, one_line(str(exc))
            break
        except Exception as exc:  # noqa: BLE001 (the full parse's own failures: both paths must raise them alike)
            outcome, error = Outcome.CONNECTION_ERROR, f"raised {type(exc).__name__}: {exc}"
            break
        if said != MORE:
            break
    rec.t_end_ns = 1
    return recorder.finish(outcome, error).to_dict()


def both(api: Api, stream: bytes, cuts: list[int], session: bool = False) -> int:
    """Asserts that both paths agree on `stream` cut at `cuts`; returns how many events the template read."""
    events = SseParser().feed(stream)
    _Counting.parsed = 0
    fast = states(api, events, True, session)
    assert fast == states(api, events, False, session)
    read_fast = len(events) - _Counting.parsed if api in COUNTING else 0
    reads = split(stream, cuts)
    fast_record = record(api, reads, True, session)
    assert fast_record == record(api, reads, False, session)
    # where the reads are cut changes the chunks' times, nothing else: the recorder's split of a read (a run of
    # the template from where the SSE parser holds nothing) loses and repeats no byte
    assert untimed(fast_record) == untimed(record(api, [stream], False, session))
    return read_fast


def untimed(record: dict) -> dict:
    """A record without its times (the reads' `now`)."""
    return {k: v for k, v in record.items() if not k.endswith("_ns")}


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


# ---- every engine's shapes --------------------------------------------------------------------------------------
@dataclass
class Shape:
    """How one engine writes its events (field order as in shared/samples and the servers' sources)."""

    engine: str
    api: Api
    usage_order: tuple = ("prompt_tokens", "completion_tokens", "total_tokens")
    usage_extra: tuple = ()
    choice_first: bool = False  # llama.cpp: choices before id/created/model
    reasoning_null: bool = False  # SGLang chat: "reasoning_content": null beside the content
    usage_null: bool = False  # SGLang completions: "usage": null in events without usage


SHAPES = [
    Shape("sglang", Api.OPENAI_CHAT, usage_extra=(("prompt_tokens_details", None), ("reasoning_tokens", 0)),
          reasoning_null=True),
    Shape("sglang", Api.OPENAI_COMPLETIONS, usage_extra=(("prompt_tokens_details", None), ("reasoning_tokens", 0)),
          usage_null=True),
    Shape("vllm", Api.OPENAI_CHAT, usage_order=("prompt_tokens", "total_tokens", "completion_tokens")),
    Shape("vllm", Api.OPENAI_COMPLETIONS, usage_order=("prompt_tokens", "total_tokens", "completion_tokens")),
    Shape("llamacpp", Api.OPENAI_CHAT, usage_order=("completion_tokens", "prompt_tokens", "total_tokens"),
          choice_first=True),
    Shape("llamacpp", Api.OPENAI_COMPLETIONS, usage_order=("completion_tokens", "prompt_tokens", "total_tokens"),
          choice_first=True),
    Shape("sglang", Api.SGLANG_GENERATE),
]


@dataclass
class Head:
    """The fields of a stream that stay put until a mid-stream change moves one."""

    rid: str = "chatcmpl-0f3a"
    created: int = 1795955685
    model: str = "Kimi-K2.6"
    prompt: int = 60
    extra: bool = False  # a field added to every event
    total: bool = True  # total_tokens in the usage
    reorder: bool = False  # usage keys written in the reverse order


@st.composite
def stream_ids(draw) -> dict:
    """A stream's own `id` and `created`, as a server gives each request: the template one stream learnt is
    taken by the next with its own (`event_template.sibling`), or, for an id written with an escape, not."""
    return {"rid": draw(st.sampled_from(["chatcmpl-0f3a", "chatcmpl-9b", "c-\u00e9", "0", 'c"q', "c\\n", "c\n"])),
            "created": draw(st.sampled_from([1795955685, 1795955686, 7, 17959556850]))}


def usage(shape: Shape, head: Head, ct) -> dict:
    values = {"prompt_tokens": head.prompt, "completion_tokens": ct,
              "total_tokens": head.prompt + ct if type(ct) is int else ct}
    keys = [k for k in shape.usage_order if head.total or k != "total_tokens"]
    out = {k: values[k] for k in (reversed(keys) if head.reorder else keys)}
    return out | dict(shape.usage_extra)


def openai_event(shape: Shape, head: Head, delta_or_text, finish, use: dict | None) -> dict:
    chat = shape.api is Api.OPENAI_CHAT
    choice: dict = {"index": 0}
    if chat:
        choice["delta"] = delta_or_text
    else:
        choice["text"] = delta_or_text
    choice |= {"logprobs": None, "finish_reason": finish}
    if shape.engine == "sglang":
        choice["matched_stop"] = None
    fields = {"id": head.rid, "object": "chat.completion.chunk" if chat else "text_completion",
              "created": head.created, "model": head.model}
    obj = {"choices": [choice], **fields} if shape.choice_first else {**fields, "choices": [choice]}
    if use is not None:
        obj["usage"] = use
    elif shape.usage_null:
        obj["usage"] = None
    if head.extra:
        obj["system_fingerprint"] = "b1-0c1e570"
    return obj


WORDS = st.text("ab ,.:?!'-w0123456789", min_size=1, max_size=12)
TEXT = st.one_of(
    WORDS, WORDS, WORDS,
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(["", " ", '"', "\\", "\n", "\t", "\x7f", "\u2028", "é", "中文", "\U0001f600", "a\"b", "\\u00e9",
                     "%d", "%%", '"},', "\x00"]),
)
RAW_TEXT = st.one_of(st.binary(max_size=8), st.sampled_from(
    [b"\\", b'"', b"\x01", b"\x1f", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\\n",
     b"\\u00e9", b"\\ud800", b"\xc3\xa9", b"\xe2\x80\xa8", b"\x7f", b'\\"', b"a\"b"]))
RAW_COUNT = st.sampled_from([b"05", b"00", b"-1", b"-0", b"1e2", b"4.0", b" 4", b"4 ", b"+4", b"0x4", b"1_0", b"",
                             b"18446744073709551615", b"18446744073709551616", b"999999999999999999",
                             b"1000000000000000000", b"9223372036854775808", b'"4"', b"null", b"true", b"[4]"])
KINDS = ["content"] * 30 + ["empty", "reasoning", "both", "both", "no-step", "escaped", "spaced", "raw-text",
                            "raw-count", "raw-tail", "change", "error", "finish", "spec", "usage", "count-jump",
                            "no-usage", "done"]


def encode(obj: dict, how: str) -> bytes:
    if how == "escaped":  # non-ASCII as \\u escapes, as Python's json writes it
        return json.dumps(obj, separators=(",", ":")).encode()
    if how == "spaced":
        return json.dumps(obj, ensure_ascii=False).encode()
    try:
        return orjson.dumps(obj)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def change(draw, head: Head) -> None:
    what = draw(st.sampled_from(["created", "model", "rid", "prompt", "extra", "total", "reorder"]))
    if what == "created":
        head.created += 1
    elif what == "model":
        head.model += "x"
    elif what == "rid":
        head.rid += "1"
    elif what == "prompt":
        head.prompt += draw(st.integers(1, 10**6))
    elif what == "extra":
        head.extra = not head.extra
    elif what == "total":
        head.total = not head.total
    else:
        head.reorder = not head.reorder


@st.composite
def openai_streams(draw, shape: Shape) -> bytes:  # noqa: C901 (one branch per kind of event)
    head = Head(prompt=draw(st.integers(0, 3000)), total=draw(st.booleans()), **draw(stream_ids()))
    running = draw(st.sampled_from(["every", "every", "every", "none", "sometimes"]))  # running usage in content events
    chat = shape.api is Api.OPENAI_CHAT
    ct = draw(st.integers(0, 3))
    step = draw(st.integers(0, 5))
    thought = draw(TEXT)
    out: list[bytes] = []
    if chat and draw(st.booleans()):
        role = {"role": "assistant", "content": "" if shape.engine != "llamacpp" else None}
        out.append(encode(openai_event(shape, head, role, None, None), "plain"))
    for _ in range(draw(st.integers(0, 20))):
        kind = draw(st.sampled_from(KINDS))
        text = draw(TEXT) if kind != "empty" else ""
        if kind == "content" and draw(st.integers(0, 3)) == 0:
            step = draw(st.integers(0, 5))  # a step unlike the last one (speculative decoding)
        if kind not in ("no-step", "empty"):
            ct += step
        if kind == "count-jump":
            ct += draw(st.sampled_from([1, 7, 10**17, 10**18, 2**64]))
        if kind == "change":
            change(draw, head)
        counted = running == "every" or (running == "sometimes" and draw(st.booleans()))
        use = usage(shape, head, COUNT_MARK if kind == "raw-count" else ct) if counted and kind != "no-usage" else None
        if kind == "error":
            err = draw(st.sampled_from([{"error": {"message": "CUDA out of memory", "code": 500}},
                                        {"object": "error", "message": "shut down", "code": 503}]))
            out.append(orjson.dumps(err))
            continue
        if kind == "spec":
            details = {"spec_accept_length": 2.5, "spec_verify_ct": max(ct, 1)}
            out.append(encode({"id": head.rid, "choices": [], "sglext": {"spec_tokens_details": details}}, "plain"))
            continue
        if kind == "usage":
            out.append(encode({"id": head.rid, "choices": [], "usage": usage(shape, head, ct)}, "plain"))
            continue
        if kind == "done":
            out.append(b"[DONE]")
            continue
        value = TEXT_MARK if kind == "raw-text" else text
        if chat:
            delta = {"reasoning_content": value} if kind == "reasoning" else {"content": value}
            if kind == "both":  # an answer's text beside reasoning (the same reasoning text each time)
                delta = {"reasoning_content": thought, "content": value if draw(st.booleans()) else ""}
            if shape.reasoning_null and kind != "reasoning":
                delta = {"reasoning_content": None, **delta}
            payload = encode(openai_event(shape, head, delta, "stop" if kind == "finish" else None, use),
                             kind if kind in ("escaped", "spaced") else "plain")
        else:
            payload = encode(openai_event(shape, head, value, "stop" if kind == "finish" else None, use),
                             kind if kind in ("escaped", "spaced") else "plain")
        if kind == "raw-text":
            payload = payload.replace(TEXT_MARK.encode(), draw(RAW_TEXT))
        if kind == "raw-count":
            payload = payload.replace(b"%d" % COUNT_MARK, draw(RAW_COUNT), 1)
        if kind == "raw-tail":
            payload += draw(st.sampled_from([b" ", b"\t", b"x", b"}", b"\x00", b",{}", b"\xff"]))
        out.append(payload)
    if draw(st.booleans()):
        out.append(encode(openai_event(shape, head, {} if chat else "", "length", None), "plain"))
    if draw(st.booleans()):
        out.append(encode({"id": head.rid, "choices": [], "usage": usage(shape, head, ct)}, "plain"))
    if draw(st.booleans()):
        out.append(b"[DONE]")
    return b"".join(draw(framed(e)) for e in out)


@st.composite
def framed(draw, event: bytes) -> bytes:
    """One event as SSE writes it: mostly `data: ` and a blank line, else with CR or CRLF line ends, no space,
    a comment or another field before it, or split over two `data:` lines."""
    how = draw(st.sampled_from(["plain"] * 12 + ["crlf", "cr", "nospace", "comment", "field", "split"]))
    if how == "split":
        k = draw(st.integers(0, len(event)))
        return b"data: " + event[:k] + b"\ndata: " + event[k:] + b"\n\n"
    head = {"comment": b": keep-alive\ndata: ", "field": b"event: message\ndata: ", "nospace": b"data:"}
    end = {"crlf": b"\r\n\r\n", "cr": b"\r\r"}
    return head.get(how, b"data: ") + event + end.get(how, b"\n\n")


@st.composite
def generate_streams(draw) -> bytes:
    out, text, ct = [], "", 0
    for _ in range(draw(st.integers(0, 8))):
        text += draw(TEXT)
        ct += draw(st.integers(0, 4))
        meta = {"id": "rid", "finish_reason": None, "prompt_tokens": 8, "completion_tokens": ct, "cached_tokens": 0}
        out.append(orjson.dumps({"text": text, "output_ids": list(range(ct)), "meta_info": meta}))
    out.append(b"[DONE]")
    return b"".join(b"data: " + e + b"\n\n" for e in out)


@st.composite
def streams(draw) -> tuple[Api, bytes]:
    shape = draw(st.sampled_from(SHAPES))
    if shape.api is Api.SGLANG_GENERATE:
        return shape.api, draw(generate_streams())
    return shape.api, draw(openai_streams(shape))


@BOUNDED
@given(streams(), st.lists(st.integers(0, 6000), max_size=12), st.lists(st.integers(0, 40), max_size=12),
       st.booleans())
def test_the_template_reads_what_the_full_parse_reads(stream, cuts, at_ends, session):
    """Reads are cut anywhere and where events end (a read that begins with whole events of the template is
    read by the template in one run, while the SSE parser holds nothing)."""
    api, data = stream
    ends = [m.end() for m in re.finditer(b"\n\n", data)] or [0]
    read_fast = both(api, data, cuts + [ends[i % len(ends)] for i in at_ends], session and api is Api.OPENAI_CHAT)
    event(f"events the template read: {'0' if not read_fast else '1-3' if read_fast < 4 else '4+'}")


# ---- the samples: the template reads most of their events ------------------------------------------------------
SAMPLES = {  # file: (api, events the template reads in the first stream, in a later one with another id)
    "sglang-chat-stream.txt": (Api.OPENAI_CHAT, 5, 6),  # 6 content events: the first learns, or, later, is read
    "sglang-chat-stream-spec-details.txt": (Api.OPENAI_CHAT, 4, 5),  # (a role event before them gives the id)
    "sglang-completions-stream.txt": (Api.OPENAI_COMPLETIONS, 3, 3),  # the last content event finishes
    "llamacpp-chat-stream.sse": (Api.OPENAI_CHAT, 29, 29),  # the id after the text: no family
    "llamacpp-completions-stream.sse": (Api.OPENAI_COMPLETIONS, 7, 7),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_samples_are_read_by_the_template(name, monkeypatch):
    """A server's first stream learns its template from its first content event; a later one with its own id
    takes it before then, from its role event (`event_template.family_template`)."""
    monkeypatch.setattr(event_template, "FAMILIES", [])
    api, first, later = SAMPLES[name]
    data = (STREAMS / name).read_bytes()
    assert both(api, data, list(range(0, len(data), 97))) == first
    ident = re.search(rb'"id":"([^"]+)"', data)
    other = data.replace(ident.group(1), b"another-id") if ident else data
    assert both(api, other, list(range(0, len(other), 89))) == later


@pytest.mark.parametrize("chat", [True, False])
def test_running_usage_is_read_by_the_template_at_any_step(chat):
    """Continuous usage (SGLang, vLLM): every content event after the first is read by the template, whether
    its count is the predicted one or not."""
    from loadgen.sim.render import OpenAIChunks, sse
    chunks = OpenAIChunks("rid", "m", chat, continuous_usage=True, prompt_tokens=60)
    total, events = 0, [sse(chunks.role())] if chat else []
    for step in [1, 1, 1, 4, 4, 2, 1, 3, 3, 3]:
        total += step
        events.append(sse(chunks.content(f" w{total}", total)))
    events += [sse(chunks.final_usage(total)), b"data: [DONE]\n\n"]
    assert both(Api.OPENAI_CHAT if chat else Api.OPENAI_COMPLETIONS, b"".join(events), []) == 9


def test_a_text_with_an_escape_leaves_the_template_in_place():
    """A newline in the text (an escape: the full parse reads the event) neither drops the template nor spends a
    stream's learning: the plain events after it are read by the template."""
    stream = b"".join(sg(t, i + 1) for i, t in enumerate([b"a", b"b\\n", b"c", b"\\n\\n", b"d"] * 5))
    assert both(Api.OPENAI_CHAT, stream, []) == 3 * 5 - 1  # a, c, d five times; the first a is learnt from


def test_a_session_keeps_its_answer_through_the_full_parse():
    data = (STREAMS / "sglang-chat-stream.txt").read_bytes()
    assert both(Api.OPENAI_CHAT, data, [], session=True) == 0
    assert record(Api.OPENAI_CHAT, [data], True, session=True)["answer"].startswith(" talo tuna digu")


# ---- learning ----------------------------------------------------------------------------------------------------
def learnt(payload: bytes, chat: bool = True):
    obj = orjson.loads(payload)
    choice = obj["choices"][0]
    text = choice["delta"]["content"] if chat else choice["text"]
    path = ("choices", 0, "delta", "content") if chat else ("choices", 0, "text")
    return learn(payload, obj, path, b'"content":' if chat else b'"text":', text, obj.get("usage") or None)


@pytest.mark.parametrize("payload", [
    b'{"choices":[{"delta":{"content":"a\\"b"}}]}',  # a text that needs an escape: the next one may not
    b'{"choices":[{"delta":{"content": "ab"}}]}',  # not as orjson writes it (a space)
    b'{"x":{"content":"ab"},"choices":[{"delta":{"content":"ab"}}]}',  # the text written before where it is read
    b'{"choices":[{"delta":{"content":"ab","content":"ab"}}]}',  # a duplicate key
    b'{"choices":[{"delta":{"content":"ab"}}],"usage":{"completion_tokens": 3}}',  # a count with a space
    b'{"choices":[{"delta":{"content":"ab"}}],"usage":{"completion_tokens":3,"completion_tokens":3}}',
])
def test_what_cannot_be_proven_is_not_learnt(payload):
    assert learnt(payload) is None


def test_a_count_written_twice_is_learnt_only_where_it_is_read():
    # "completion_tokens":3 in another object first: not the one the full parse reads
    payload = b'{"choices":[{"delta":{"content":"ab"}}],"x":{"completion_tokens":3},"usage":{"completion_tokens":3}}'
    assert learnt(payload) is None


def chat_event(rid: str, created: int, text: str, ct: int, model: str = "m", prompt: int = 9) -> bytes:
    return orjson.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
                         "usage": {"prompt_tokens": prompt, "completion_tokens": ct, "total_tokens": prompt + ct}})


def learnt_as_family(payload: bytes) -> tuple:
    tpl = tuple(learnt(payload))
    remember_family(tpl, orjson.loads(payload))
    return tpl


def sibling_of(payload: bytes):
    obj = orjson.loads(payload)
    return sibling(payload, obj, obj["choices"][0]["delta"]["content"], obj["usage"])


def test_a_stream_takes_the_template_another_learnt_with_its_own_id_and_created(monkeypatch):
    """`sibling` gives exactly what learning the event gives, for the events of the same shape with another id
    and created; anything else of the head, or of the rest, that differs gives none."""
    monkeypatch.setattr(event_template, "FAMILIES", [])
    learnt_as_family(chat_event("chatcmpl-a1", 1795955685, "x", 2))
    for payload in [chat_event("chatcmpl-b2", 1795955686, "yz", 1), chat_event("é-9", 7, "yz", 3),
                    chat_event("", 17959556850, "q", 5)]:
        assert sibling_of(payload) == tuple(learnt(payload))
    for payload in [chat_event("chatcmpl-b2", 1795955686, "yz", 1, model="n"),  # another model
                    chat_event("chatcmpl-b2", 1795955686, "yz", 1, prompt=10),  # another prompt: another rest
                    chat_event('c"q', 1795955686, "yz", 1),  # an id written with an escape
                    chat_event("c\n", 1795955686, "yz", 1),
                    chat_event("chatcmpl-b2", 1795955686, "yz", 1).replace(b'"created":1795955686', b'"created":1.7e9'),
                    chat_event("chatcmpl-b2", 1795955686, "yz", 1).replace(b"}}", b"},\"x\":1}")]:
        assert sibling_of(payload) is None


def role_event(rid: str, created: int, model: str = "m") -> bytes:
    return orjson.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})


def test_a_stream_takes_the_newest_family_at_its_role_event_with_its_own_id_and_created(monkeypatch):
    """`family_template`: the template a stream's first content event would learn, taken at the role event before
    it from the family a sibling last matched (or learnt); none for an id orjson writes with an escape, or where the
    role event does not begin as the family's events do."""
    monkeypatch.setattr(event_template, "FAMILIES", [])
    assert family_template(role_event("r", 1), orjson.loads(role_event("r", 1))) is None  # no family yet
    learnt_as_family(chat_event("chatcmpl-a1", 1795955685, "x", 2))
    learnt_as_family(chat_event("chatcmpl-a1", 1795955685, "x", 2, prompt=10))  # newest
    for rid, created in [("chatcmpl-b2", 1795955686), ("é-9", 7), ("", 17959556850)]:
        role = role_event(rid, created)
        assert family_template(role, orjson.loads(role)) == (tuple(learnt(chat_event(rid, created, "yz", 3, prompt=10))),
                                                             0)
    assert sibling_of(chat_event("c", 1, "x", 2)) is not None  # the family of prompt 9 is the newest again
    role = role_event("d", 2)
    assert family_template(role, orjson.loads(role)) == (tuple(learnt(chat_event("d", 2, "yz", 3))), 0)
    for role in [role_event('c"q', 1), role_event("c\n", 1), b" " + role_event("d", 2)]:
        assert family_template(role, orjson.loads(role)) is None


def test_a_first_content_event_the_run_reads_says_the_stream_has_running_counts(monkeypatch):
    """Found by the fuzzer: a stream that took its template at its role event reads its first counted event in the
    run, which must set what that event's full parse sets (`running_counts`: the counts are running ones)."""
    monkeypatch.setattr(event_template, "FAMILIES", [])
    learnt_as_family(chat_event("a", 1, "x", 5))
    stream = b"".join(b"data: %s\n\n" % e for e in [role_event("b", 2), chat_event("b", 2, "y", 5)])
    events = SseParser().feed(stream)
    _Counting.parsed = 0
    fast = states(Api.OPENAI_CHAT, events, True)
    assert _Counting.parsed == 1  # the role event; the content event was read by the template
    assert fast == states(Api.OPENAI_CHAT, events, False) and fast[-1][1][10] is True  # running_counts


def test_a_family_is_kept_only_where_the_head_holds_the_id_then_created(monkeypatch):
    monkeypatch.setattr(event_template, "FAMILIES", [])
    learnt_as_family(chat_event('c"q', 1, "x", 2))  # the id written with an escape
    payload = orjson.dumps({"created": 1, "id": "c", "choices": [{"delta": {"content": "x"}}]})
    learnt_as_family(payload)  # created before the id
    payload = orjson.dumps({"choices": [{"delta": {"content": "x"}}], "id": "c", "created": 1})
    learnt_as_family(payload)  # both after the text (llama.cpp's order): in the rest, not the head
    assert event_template.FAMILIES == []
    for i in range(event_template.MAX_FAMILIES + 3):
        learnt_as_family(chat_event("c", 1, "x", 2, prompt=i))
        learnt_as_family(chat_event("d", 2, "x", 2, prompt=i))  # the same family: kept once
    assert len(event_template.FAMILIES) == event_template.MAX_FAMILIES
    assert sibling_of(chat_event("e", 3, "y", 4, prompt=event_template.MAX_FAMILIES + 2)) is not None


def test_plain_text():
    assert all(plain_text(t) for t in [b"", b" w12", "é中\U0001f600".encode(), b"\x7f", "\u2028".encode()])
    assert not any(plain_text(t) for t in [b"\\", b"\x1f", b"\xff", b"\xed\xa0\x80", b"\xc3"])


# ---- what the fuzzer found ----------------------------------------------------------------------------------------
# Each check of the template, taken out, and the fuzzer's minimised stream (written shorter here) that told it.
SG = (b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{%s},'
      b'"finish_reason":%s}],"usage":{"prompt_tokens":0,"completion_tokens":%d,"total_tokens":%d}}')


def sg(text: bytes, ct: int, finish: bytes = b"null", delta: bytes = b'"content":"%s"') -> bytes:
    """An SGLang-like chat event with running usage, `text` as its bytes are written, framed."""
    return b"data: " + SG % (delta % text, finish, ct, ct) + b"\n\n"


FOUND = [  # (why, stream, session)
    ("a control character written raw in the text: the full parse refuses the event",
     sg(b"a", 1) + sg(b"\x00", 2), False),
    ("a byte that is not UTF-8 in the text: likewise", sg(b"a", 1) + sg(b"\x80", 2), False),
    ("bytes after the end of one event (read alone): not the template's event", sg(b"a", 1) + sg(b"b", 2)[:-2] +
     b"x\n\n", False),
    ("a finish, then an event of the counted template: after a finish a usage is a total, not a running count",
     sg(b"a", 1) + sg(b"b", 2, b'"stop"') + sg(b"c", 3), False),
    ("a session's turn keeps its answer's text: the full parse reads every event", sg(b"a", 1) + sg(b"b", 2), True),
    ("a count written with a leading zero (and the total not its own): the full parse refuses the event",
     sg(b"a", 1) + sg(b"b", 2).replace(b'"completion_tokens":2', b'"completion_tokens":02'), False),
    ("a count lower than the last, in an event without text: the full parse adds its step to the chunk before (found "
     "by tests/test_chunked_template.py, a float count then an integer)", sg(b"a", 1) + sg(b"", 0), False),
    # written by hand (the fuzzer rarely repeats a reasoning text): reasoning beside the answer's text, then beside
    # an empty one, which is a reasoning chunk
    ("an event with reasoning is not learnt from", sg(b"a", 1, delta=b'"reasoning_content":"r","content":"%s"') +
     sg(b"", 2, delta=b'"reasoning_content":"r","content":"%s"'), False),
]


@pytest.mark.parametrize("why, stream, session", FOUND, ids=[f"found-{i}" for i in range(len(FOUND))])
@pytest.mark.parametrize("reads", ["whole", "1-byte", "events"])
def test_what_the_fuzzer_found(why, stream, session, reads):
    first = StreamState(api=Api.OPENAI_CHAT)
    first.feed(SseParser().feed(stream)[0])
    assert (first._template is not None) == ("reasoning" not in why)  # a template is learnt: the check is reached
    # and the event it guards is read by the full parse, as the reference reads it
    cuts = {"whole": [], "1-byte": list(range(len(stream))), "events": [m.end() for m in re.finditer(b"\n\n", stream)]}
    assert both(Api.OPENAI_CHAT, stream, cuts[reads], session) == 0
