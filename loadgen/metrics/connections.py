"""Connection figures of a cell, from its records."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.record import Record


def retried_on_new_connection(recs: Sequence[Record]) -> int:
    """Σ retried_on_new_connection over the cell's measured requests (all outcomes): requests that failed on a
    reused keep-alive connection before any byte of their answer (the server had closed it) and were sent once
    more on a new connection. Not failures: the server never saw the first attempt."""
    return sum(r.retried_on_new_connection for r in recs)
