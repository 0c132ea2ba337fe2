"""Connection figures of a cell, from its records."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.record_table import RecordTable
from loadgen.record import Record


def retried_on_new_connection(recs: Sequence[Record] | RecordTable) -> int:
    """Σ retried_on_new_connection over the cell's measured requests (all outcomes): requests that failed on a
    reused keep-alive connection before any byte of their answer (the server had closed it) and were sent once
    more on a new connection. Not failures: the server never saw the first attempt."""
    return int(RecordTable.of(recs).ints("retried_on_new_connection").sum())
