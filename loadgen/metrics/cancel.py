"""Figures of the requests the client closed on purpose (`--cancel-fraction`; outcome `abandoned`).

Over a cell's measured records:
- abandoned = the records whose outcome is abandoned; abandoned_fraction = abandoned / measured records;
- tokens_before_close: each abandoned request's output tokens when it was closed (the server's running
  count, `completion_tokens`; else the content chunks): mean, p50, max;
- close_after_s: t_end − t_sent of each abandoned request (when the client closed it): mean, p50, max.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.request import e2e_s
from loadgen.metrics.stats import mean, percentile
from loadgen.names import Outcome
from loadgen.record import Record


def _spread(values: list[float]) -> dict:
    return {"mean": mean(values), "p50": percentile(values, 50), "max": max(values) if values else None}


def tokens_before_close(r: Record) -> int:
    """Output tokens an abandoned request had received: completion_tokens (running count), else its chunks."""
    return r.completion_tokens if r.completion_tokens is not None else r.chunks


def cancellation_figures(recs: Sequence[Record]) -> dict | None:
    """{abandoned, abandoned_fraction, tokens_before_close, close_after_s}, or None when none was abandoned."""
    gone = [r for r in recs if r.outcome == Outcome.ABANDONED]
    if not gone:
        return None
    return {"abandoned": len(gone), "abandoned_fraction": len(gone) / len(recs),
            "tokens_before_close": _spread([tokens_before_close(r) for r in gone]),
            "close_after_s": _spread([e2e_s(r) for r in gone])}
