"""Reasoning deltas (`reasoning_content`, or vLLM's `reasoning`) counted apart from the answer: the stream
recorder on tables of events, and the cell's figures on hand-built records. Against the simulator
(`--reasoning-tokens`): tests/test_trace.py::check_reasoning."""

from __future__ import annotations

import orjson
import pytest

from loadgen.client.recorder import StreamRecorder
from loadgen.metrics.reasoning import reasoning_figures
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit
CELL = CellKey(60, 1)


def event(delta: dict, tokens: int | None, **usage) -> bytes:
    obj = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if tokens is not None:
        obj["usage"] = {"prompt_tokens": 60, "completion_tokens": tokens, **usage}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_chunks_are_timed_and_counted_apart(key):
    rec = Record("r", CELL, 0)
    recorder = StreamRecorder(rec, "openai-chat")
    recorder.feed(event({key: "let me"}, 2), 100)
    recorder.feed(event({key: " think"}, 5), 200)
    recorder.feed(event({"content": "Yes."}, 7), 300)
    recorder.feed(event({"content": " Done"}, 9) + DONE, 400)
    recorder.finish(None, None)
    assert (rec.outcome, rec.t_first_token_ns, rec.t_first_reasoning_ns, rec.t_first_answer_ns) == ("ok", 100, 100, 300)
    assert (rec.reasoning_tokens, rec.completion_tokens, rec.chunks) == (5, 9, 4)


def test_the_servers_reasoning_count_wins_and_a_plain_answer_has_none():
    rec = Record("r", CELL, 0)
    recorder = StreamRecorder(rec, "openai-chat")
    recorder.feed(event({"reasoning_content": "hm"}, None) + event({"content": "ok"}, None), 1)
    final = {"choices": [], "usage": {"prompt_tokens": 60, "completion_tokens": 12,
                                      "completion_tokens_details": {"reasoning_tokens": 8}}}
    recorder.feed(b"data: " + orjson.dumps(final) + b"\n\n" + DONE, 2)
    recorder.finish(None, None)
    assert (rec.reasoning_tokens, rec.completion_tokens) == (8, 12)
    plain = Record("r", CELL, 1)
    p = StreamRecorder(plain, "openai-chat")
    p.feed(event({"content": "hi"}, 1, reasoning_tokens=0) + DONE, 5)
    p.finish(None, None)
    assert (plain.t_first_reasoning_ns, plain.reasoning_tokens, plain.t_first_answer_ns) == (None, None, 5)


def test_reasoning_figures():
    ms = 1_000_000

    def rec(ttfr_ms, ttfa_ms, reasoning, completion):
        return Record("r", CELL, 0, t_sent_ns=10 * ms, t_first_reasoning_ns=None if ttfr_ms is None else 10 * ms + ttfr_ms * ms,
                      t_first_answer_ns=None if ttfa_ms is None else 10 * ms + ttfa_ms * ms, reasoning_tokens=reasoning,
                      completion_tokens=completion)
    recs = [rec(10, 50, 30, 40), rec(20, 90, 70, 80), rec(5, None, 16, 16), rec(None, 4, None, 10)]
    f = reasoning_figures(recs)
    assert f["requests"] == 3
    assert f["time_to_first_reasoning_s"]["mean"] == pytest.approx(35e-3 / 3)
    assert f["time_to_first_answer_s"]["mean"] == pytest.approx(0.070)  # over the two that answered
    assert f["reasoning_tokens"]["mean"] == pytest.approx(116 / 3)
    assert f["reasoning_share"] == pytest.approx(116 / 136)
    assert reasoning_figures(recs[3:]) is None
