"""Token usage wherever the server puts it: a separate usage chunk, the finish chunk itself (llama.cpp's
/v1/completions), llama.cpp's `timings`, or running usage in every chunk; the missing-usage error only when
no usage arrived at all. On llama-server's captured streams and on tables of events."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadgen.client.recorder import StreamRecorder
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit

STREAMS = Path(__file__).parent / "fixtures" / "streams"


def record(api: str, *events: dict | str, reads: list[bytes] | None = None) -> Record:
    """The record of a stream made of `events` (dicts as JSON, strings as they are), judged by the stream."""
    rec = StreamRecorder(Record("run", CellKey(60, 1), 0), api)
    data = b"".join(b"data: " + (e.encode() if isinstance(e, str) else orjson.dumps(e)) + b"\n\n" for e in events)
    for part in reads or [data]:
        rec.feed(part, 1)
    return rec.finish(None, None)


def chunk(text: str | None = None, finish: str | None = None, **extra) -> dict:
    choice = {"index": 0, "text": text or "", "finish_reason": finish}
    return {"choices": [choice], "object": "text_completion", **extra}


USAGE = {"prompt_tokens": 60, "completion_tokens": 3, "total_tokens": 63, "prompt_tokens_details": {"cached_tokens": 5}}
TIMINGS = {"cache_n": 5, "prompt_n": 55, "predicted_n": 3, "draft_n": 4, "draft_n_accepted": 2}


def test_llamacpp_chat_sample_usage_chunk_with_timings():
    rec = record("openai-chat", reads=[(STREAMS / "llamacpp-chat-stream.sse").read_bytes()])
    assert (rec.outcome, rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens) == ("ok", 32, 32, 0)
    assert rec.spec == {"draft_n": 24, "draft_n_accepted": 24}
    assert rec.chunk_tokens is None  # no running counts: one event per token, totals only at the end


def test_llamacpp_completions_sample_usage_in_the_finish_chunk():
    data = (STREAMS / "llamacpp-completions-stream.sse").read_bytes()
    rec = record("openai-completions", reads=[data[i:i + 97] for i in range(0, len(data), 97)])
    assert (rec.outcome, rec.error) == ("ok", None)
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens) == (5, 8, 4)
    assert rec.spec == {"draft_n": 5, "draft_n_accepted": 5}
    assert rec.chunks == 8  # the finish chunk (empty text) carries the totals, not a ninth chunk of 8 tokens


@pytest.mark.parametrize("tail, expected", [
    # a separate usage chunk with choices: []
    ([chunk(finish="length"), {"choices": [], "usage": USAGE}, "[DONE]"], (60, 3, 5, None)),
    # usage in the finish chunk (llama.cpp /v1/completions)
    ([chunk(finish="length", usage=USAGE, timings=TIMINGS), "[DONE]"], (60, 3, 5, {"draft_n": 4,
                                                                                 "draft_n_accepted": 2})),
    # only timings: counts from predicted_n, prompt_n + cache_n
    ([chunk(finish="length", timings=TIMINGS), "[DONE]"], (60, 3, 5, {"draft_n": 4, "draft_n_accepted": 2})),
    # usage without prompt_tokens_details: cached not reported (None), not 0
    ([chunk(finish="length"), {"choices": [], "usage": {"prompt_tokens": 60, "completion_tokens": 3}}, "[DONE]"],
     (60, 3, None, None)),
])
def test_usage_wherever_it_arrives(tail, expected):
    rec = record("openai-completions", chunk(" a"), chunk(" b"), chunk(" c"), *tail)
    assert rec.outcome == "ok", rec.error
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens, rec.spec) == expected
    assert rec.chunks == 3


def test_running_usage_in_every_chunk_counts_per_chunk_and_needs_no_final_chunk():
    events = [chunk(" a b", usage={"prompt_tokens": 60, "completion_tokens": 2}),
              chunk(" c", finish="length", usage={"prompt_tokens": 60, "completion_tokens": 3}), "[DONE]"]
    rec = record("openai-completions", *events)
    assert (rec.outcome, rec.completion_tokens, list(rec.chunk_tokens)) == ("ok", 3, [2, 1])


def test_the_server_is_blamed_only_when_no_usage_arrived_at_all():
    rec = record("openai-completions", chunk(" a"), chunk(finish="length"), "[DONE]")
    assert rec.outcome == "protocol_error"
    assert rec.error == "stream ended without token usage (server ignored stream_options.include_usage?)"


def test_generate_meta_info_cached_tokens():
    events = [{"text": "a", "meta_info": {"completion_tokens": 1, "prompt_tokens": 60, "cached_tokens": 12}},
              {"text": "a b", "meta_info": {"completion_tokens": 2, "prompt_tokens": 60, "cached_tokens": 12,
                                            "finish_reason": {"type": "length"}}}, "[DONE]"]
    rec = record("sglang-generate", *events)
    assert (rec.outcome, rec.completion_tokens, rec.cached_tokens) == ("ok", 2, 12)
