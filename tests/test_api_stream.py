"""StreamState: what each API's events mean (token counts from the server, content, errors, completeness), on
tables of events, on SGLang's wire samples, and as properties over generated streams."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.client.sse import SseParser
from loadgen.client.stream import ProtocolError, StreamState
from loadgen.sim.render import OpenAIChunks, generate_event, sse

pytestmark = pytest.mark.unit

STREAMS = Path(__file__).parent / "fixtures" / "streams"
SAMPLE_API = {"sglang-chat-stream.txt": "openai-chat", "sglang-chat-stream-spec-details.txt": "openai-chat",
              "sglang-completions-stream.txt": "openai-completions", "sglang-generate-stream.txt": "sglang-generate"}


def run(api: str, *reads: bytes) -> tuple[StreamState, list[tuple[bool, int | None]]]:
    """Feed reads through the SSE parser into a StreamState; (state, [(content, new_tokens) per event])."""
    parser, state, seen = SseParser(), StreamState(api=api), []
    for r in reads:
        for event in parser.feed(r):
            state.feed(event)
            seen.append((state.content, state.new_tokens))
    return state, seen


# ---- the samples ----------------------------------------------------------------------------------------------
EXPECTED = {  # prompt, completion, per-event (content, new_tokens), spec accept length
    "sglang-chat-stream.txt": (8, 24, [(False, 0)] + [(True, None)] * 6 + [(False, 0)] * 3, None),
    "sglang-chat-stream-spec-details.txt": (8, 24, [(False, 0)] + [(True, None)] * 5 + [(False, 0)] * 4, 6.0),
    "sglang-completions-stream.txt": (8, 16, [(True, None)] * 5 + [(False, 0)] * 2, None),
    "sglang-generate-stream.txt": (8, 16, [(True, 1), (True, 4), (True, 5), (True, 4), (True, 2), (False, 0)], 4.0),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_samples(name):
    state, seen = run(SAMPLE_API[name], (STREAMS / name).read_bytes())
    prompt, completion, events, accept = EXPECTED[name]
    assert (state.prompt_tokens, state.completion_tokens, state.done) == (prompt, completion, True)
    assert seen == events
    assert (state.spec or {}).get("spec_accept_length") == accept
    assert state.incomplete_reason() is None
    # the role chunk (empty content) is not the first token; the server's running counts add up to the total
    if SAMPLE_API[name] == "sglang-generate":
        assert sum(n for _, n in seen) == completion and state.running_counts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(EXPECTED)), st.lists(st.integers(min_value=0, max_value=4000), max_size=15))
def test_samples_split_anywhere_read_the_same(name, cuts):
    data = (STREAMS / name).read_bytes()
    points = sorted({min(c, len(data)) for c in cuts})
    reads = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    whole, seen_whole = run(SAMPLE_API[name], data)
    split, seen_split = run(SAMPLE_API[name], *reads)
    assert seen_split == seen_whole
    assert (split.prompt_tokens, split.completion_tokens, split.spec, split.done) == \
        (whole.prompt_tokens, whole.completion_tokens, whole.spec, whole.done)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(EXPECTED)), st.data())
def test_a_stream_cut_short_is_never_complete(name, data):
    events = SseParser().feed((STREAMS / name).read_bytes())
    keep = data.draw(st.integers(min_value=0, max_value=len(events) - 1))  # [DONE] is the last event
    state = StreamState(api=SAMPLE_API[name])
    for e in events[:keep]:
        state.feed(e)
    reason = state.incomplete_reason()
    assert reason == "stream ended without [DONE]"
    # [DONE] without a usage count is not complete either (OpenAI routes send usage in its own chunk)
    if SAMPLE_API[name] != "sglang-generate":
        no_usage = StreamState(api=SAMPLE_API[name])
        for e in events:
            if b'"usage":{' not in e:
                no_usage.feed(e)
        assert no_usage.incomplete_reason() == \
            "stream ended without token usage (server ignored stream_options.include_usage?)"


# ---- generated streams with running counts (continuous_usage_stats, /generate) ---------------------------------
def openai_stream(chat: bool, sizes: list[int], prompt: int) -> bytes:
    chunks = OpenAIChunks("rid", "m", chat, continuous_usage=True, prompt_tokens=prompt)
    out = [sse(chunks.role())] if chat else []
    total = 0
    for i, k in enumerate(sizes):
        total += k
        out.append(sse(chunks.content("w" * k, total, "length" if i == len(sizes) - 1 else None)))
    out += [sse(chunks.final_usage(total)), b"data: [DONE]\n\n"]
    return b"".join(out)


def generate_stream(sizes: list[int], prompt: int) -> bytes:
    out, total = [], 0
    for i, k in enumerate(sizes):
        total += k
        last = i == len(sizes) - 1
        out.append(sse(generate_event("rid", "w" * total, total, prompt, {"type": "length"} if last else None,
                                      {"spec_verify_ct": len(sizes) - 1} if last else None)))
    return b"".join(out) + b"data: [DONE]\n\n"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["openai-chat", "openai-completions", "sglang-generate"]),
       st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=40),
       st.integers(min_value=1, max_value=100_000), st.lists(st.integers(min_value=0, max_value=20_000), max_size=8))
def test_running_counts_give_every_chunk_its_tokens(api, sizes, prompt, cuts):
    raw = generate_stream(sizes, prompt) if api == "sglang-generate" else \
        openai_stream(api == "openai-chat", sizes, prompt)
    points = sorted({min(c, len(raw)) for c in cuts})
    state, seen = run(api, *[raw[a:b] for a, b in zip([0, *points], [*points, len(raw)])])
    assert [n for content, n in seen if content] == sizes  # multi-token chunks of speculative decoding
    assert state.completion_tokens == sum(sizes) and state.prompt_tokens == prompt
    assert state.done and state.finished and state.incomplete_reason() is None


# ---- single events ----------------------------------------------------------------------------------------------
def test_protocol_errors_quote_the_event():
    cases = [
        ("openai-chat", b'{"choices": [{"delta": {"content": "x"', "event is not JSON: b'{\"choices\": [{\"delta\""),
        ("openai-chat", b"[1, 2]", "event is not a JSON object: b'[1, 2]'"),
        ("openai-chat", b'{"id": "x"}', "event has no 'choices': b'{\"id\":\"x\"}'"),
        ("sglang-generate", b'{"text": "x"}', "event has no 'meta_info': b'{\"text\":\"x\"}'"),
        ("sglang-generate", b'{"text": "x", "meta_info": {}}', "meta_info has no completion_tokens"),
    ]
    for api, event, message in cases:
        with pytest.raises(ProtocolError) as exc:
            StreamState(api=api).feed(event)
        assert str(exc.value).startswith(message), (api, event, str(exc.value))


@pytest.mark.parametrize("event,message", [
    (b'{"error": {"message": "CUDA out of memory", "code": 500}}', "CUDA out of memory"),
    (b'{"error": "aborted"}', "aborted"),
    (b'{"object": "error", "message": "The engine was shut down", "type": "InternalServerError", "code": 503}',
     "The engine was shut down"),
])
@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "sglang-generate"])
def test_error_events_make_the_stream_incomplete(api, event, message):
    state = StreamState(api=api)
    state.feed(event)
    state.feed(b"[DONE]")
    assert state.error == message
    assert state.incomplete_reason() == f"server error in stream: {message}"


def test_reasoning_content_counts_as_content():
    state = StreamState(api="openai-chat")
    state.feed(orjson.dumps({"choices": [{"delta": {"reasoning_content": "think"}, "finish_reason": None}]}))
    assert state.content and state.new_tokens is None
    state.feed(orjson.dumps({"choices": [{"delta": {"content": ""}, "finish_reason": None}]}))
    assert not state.content and state.new_tokens == 0
