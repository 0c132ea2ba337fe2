"""Figures of multi-turn sessions (`--sessions`), from a cell's measured records (each a turn: `session`,
`turn`), so a prefix cache's effect on later turns shows (definitions.md#sessions).

- `session_figures`: sessions = distinct `session` values; turns_mean = turn requests / sessions; turns_max =
  the most turns sent in one session; completed_turns_ok = ok turns / turn requests.
- `turn_figures`: for each turn index k (from 0), over the turns k that ended ok: requests (every outcome),
  ok, ttft_s {mean, p50, p90} (t_first_token − t_sent), prompt_tokens_mean, cached_tokens (Σ, the server's
  report; None when none reported) and cached_fraction = Σ cached_tokens / Σ prompt_tokens of those that
  reported both (`server_counts.cached_fraction`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.record_table import NONE, RecordTable, present
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.server_counts import cached_fraction, cached_tokens
from loadgen.metrics.stats import distribution, mean
from loadgen.record import Record


def session_figures(recs: Sequence[Record] | RecordTable) -> dict | None:
    """{sessions, turns_mean, turns_max, ok_fraction}, or None when no record is a session's turn."""
    t = RecordTable.of(recs)
    if not t.any_value("session"):  # asked first: a cell of single requests keeps no column of Nones
        return None
    is_turn = t.ints("session") != NONE
    turns = int(is_turn.sum())
    if not turns:
        return None
    _, per = np.unique(t.ints("session")[is_turn], return_counts=True)
    return {"sessions": len(per), "turns_mean": turns / len(per), "turns_max": int(per.max()),
            "ok_fraction": int(t.ok_mask()[is_turn].sum()) / turns}


def turn_figures(recs: Sequence[Record] | RecordTable) -> list[dict] | None:
    """One entry per turn index, in order; None when no record is a session's turn."""
    t = RecordTable.of(recs)
    if not t.any_value("turn"):
        return None
    turn = t.ints("turn")
    indices = np.unique(turn[turn != NONE]).tolist()
    if not indices:
        return None
    out = []
    for k in indices:
        group = t.where(turn == k)
        ok = group.ok()
        ttft = distribution(RequestColumns.of(ok).ttft_s(), (50, 90))
        out.append({"turn": k, "requests": len(group), "ok": len(ok),
                    "ttft_s": {q: ttft[q] for q in ("mean", "p50", "p90")},
                    "prompt_tokens_mean": mean(present(ok.ints("prompt_tokens"))),
                    "cached_tokens": cached_tokens(ok), "cached_fraction": cached_fraction(ok)})
    return out
