"""Figures of reasoning models' answers: reasoning deltas (`reasoning_content` or `reasoning`) counted apart
from the answer's own content (definitions.md#reasoning). Over a cell's ok requests that reasoned:

- time to first reasoning token = t_first_reasoning − t_sent;
- time to first answer token = t_first_answer − t_sent (the reasoning's cost to the user is the gap);
- reasoning_tokens per request (the server's `completion_tokens_details.reasoning_tokens`, else the reasoning
  chunks' running counts); reasoning_share = Σ reasoning_tokens / Σ completion_tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.record_table import NONE, RecordTable, or_zero
from loadgen.metrics.stats import Values, distribution
from loadgen.record import Record

NS = 1e9


def time_to_first_reasoning_s(recs: Sequence[Record] | RecordTable) -> np.ndarray:
    """t_first_reasoning − t_sent of the records that reasoned, in record order."""
    return _since_sent(RecordTable.of(recs), "t_first_reasoning_ns")


def time_to_first_answer_s(recs: Sequence[Record] | RecordTable) -> np.ndarray:
    """t_first_answer − t_sent of the records where answer content arrived, in record order."""
    return _since_sent(RecordTable.of(recs), "t_first_answer_ns")


def _since_sent(t: RecordTable, name: str) -> np.ndarray:
    """(time `name` − t_sent) / 1e9 of the rows where `name` is not None."""
    stamp = t.ints(name)
    has = stamp != NONE
    return (stamp[has] - t.ints("t_sent_ns")[has]) / NS


def _three(values: Values) -> dict:
    d = distribution(values, (50, 90))
    return {"mean": d["mean"], "p50": d["p50"], "p90": d["p90"]}


def reasoning_figures(ok: Sequence[Record] | RecordTable) -> dict | None:
    """{requests, time_to_first_reasoning_s, time_to_first_answer_s, reasoning_tokens, reasoning_share}, or
    None when no ok request reasoned."""
    t = RecordTable.of(ok)
    if not t.any_value("t_first_reasoning_ns"):  # asked first: a cell that did not reason keeps no column of Nones
        return None
    thought = t.where(t.ints("t_first_reasoning_ns") != NONE)
    if not len(thought):
        return None
    tokens = or_zero(thought.ints("reasoning_tokens"))
    completion = int(or_zero(thought.ints("completion_tokens")).sum())
    return {"requests": len(thought),
            "time_to_first_reasoning_s": _three(time_to_first_reasoning_s(thought)),
            "time_to_first_answer_s": _three(time_to_first_answer_s(thought)),
            "reasoning_tokens": _three(tokens),
            "reasoning_share": int(tokens.sum()) / completion if completion else None}
