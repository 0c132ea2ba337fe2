"""Figures of reasoning models' answers: reasoning deltas (`reasoning_content` or `reasoning`) counted apart
from the answer's own content (definitions.md#reasoning). Over a cell's ok requests that reasoned:

- time to first reasoning token = t_first_reasoning − t_sent;
- time to first answer token = t_first_answer − t_sent (the reasoning's cost to the user is the gap);
- reasoning_tokens per request (the server's `completion_tokens_details.reasoning_tokens`, else the reasoning
  chunks' running counts); reasoning_share = Σ reasoning_tokens / Σ completion_tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.stats import distribution
from loadgen.record import Record

NS = 1e9


def time_to_first_reasoning_s(r: Record) -> float | None:
    """t_first_reasoning − t_sent, None without reasoning."""
    return (r.t_first_reasoning_ns - r.t_sent_ns) / NS if r.t_first_reasoning_ns is not None else None


def time_to_first_answer_s(r: Record) -> float | None:
    """t_first_answer − t_sent, None when no answer content arrived."""
    return (r.t_first_answer_ns - r.t_sent_ns) / NS if r.t_first_answer_ns is not None else None


def _three(values: Sequence[float]) -> dict:
    d = distribution(values, (50, 90))
    return {"mean": d["mean"], "p50": d["p50"], "p90": d["p90"]}


def reasoning_figures(ok: Sequence[Record]) -> dict | None:
    """{requests, time_to_first_reasoning_s, time_to_first_answer_s, reasoning_tokens, reasoning_share}, or
    None when no ok request reasoned."""
    thought = [r for r in ok if r.t_first_reasoning_ns is not None]
    if not thought:
        return None
    tokens = [r.reasoning_tokens or 0 for r in thought]
    completion = sum(r.completion_tokens or 0 for r in thought)
    return {"requests": len(thought),
            "time_to_first_reasoning_s": _three([t for r in thought if (t := time_to_first_reasoning_s(r)) is not None]),
            "time_to_first_answer_s": _three([t for r in thought if (t := time_to_first_answer_s(r)) is not None]),
            "reasoning_tokens": _three(tokens), "reasoning_share": sum(tokens) / completion if completion else None}
