"""Figures of the requests the client closed on purpose (`--cancel-fraction`; outcome `abandoned`).

Over a cell's measured records:
- abandoned = the records whose outcome is abandoned; abandoned_fraction = abandoned / measured records;
- tokens_before_close: each abandoned request's output tokens when it was closed (the server's running
  count, `completion_tokens`; else the content chunks): mean, p50, max;
- close_after_s: t_end − t_sent of each abandoned request (when the client closed it): mean, p50, max.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.record_table import NONE, RecordTable
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.stats import mean, percentile
from loadgen.names import Outcome
from loadgen.record import Record


def _spread(values: list) -> dict:
    return {"mean": mean(values), "p50": percentile(values, 50), "max": max(values) if values else None}


def tokens_before_close(recs: Sequence[Record] | RecordTable) -> np.ndarray:
    """Output tokens each (abandoned) request had received: completion_tokens (running count), else its chunks."""
    t = RecordTable.of(recs)
    tokens = t.ints("completion_tokens")
    return np.where(tokens != NONE, tokens, t.ints("chunks"))


def cancellation_figures(recs: Sequence[Record] | RecordTable) -> dict | None:
    """{abandoned, abandoned_fraction, tokens_before_close, close_after_s}, or None when none was abandoned."""
    t = RecordTable.of(recs)
    gone = t.where(t.labels("outcome") == Outcome.ABANDONED)
    if not len(gone):
        return None
    return {"abandoned": len(gone), "abandoned_fraction": len(gone) / len(t),
            "tokens_before_close": _spread(tokens_before_close(gone).tolist()),
            "close_after_s": _spread(RequestColumns.of(gone).e2e_s().tolist())}
