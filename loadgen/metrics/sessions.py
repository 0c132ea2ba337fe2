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

from collections import Counter, defaultdict
from collections.abc import Sequence

from loadgen.metrics.request import ttft_s
from loadgen.metrics.server_counts import cached_fraction, cached_tokens
from loadgen.metrics.stats import distribution, mean
from loadgen.record import Record


def session_figures(recs: Sequence[Record]) -> dict | None:
    """{sessions, turns_mean, turns_max, ok_fraction}, or None when no record is a session's turn."""
    turns = [r for r in recs if r.session is not None]
    if not turns:
        return None
    per = Counter(r.session for r in turns)
    return {"sessions": len(per), "turns_mean": len(turns) / len(per), "turns_max": max(per.values()),
            "ok_fraction": sum(r.ok for r in turns) / len(turns)}


def turn_figures(recs: Sequence[Record]) -> list[dict] | None:
    """One entry per turn index, in order; None when no record is a session's turn."""
    by_turn: dict[int, list[Record]] = defaultdict(list)
    for r in recs:
        if r.turn is not None:
            by_turn[r.turn].append(r)
    if not by_turn:
        return None
    out = []
    for k in sorted(by_turn):
        ok = [r for r in by_turn[k] if r.ok]
        ttft = distribution([t for r in ok if (t := ttft_s(r)) is not None], (50, 90))
        out.append({"turn": k, "requests": len(by_turn[k]), "ok": len(ok),
                    "ttft_s": {q: ttft[q] for q in ("mean", "p50", "p90")},
                    "prompt_tokens_mean": mean([r.prompt_tokens for r in ok if r.prompt_tokens is not None]),
                    "cached_tokens": cached_tokens(ok), "cached_fraction": cached_fraction(ok)})
    return out
