"""Figures of a closed-loop cell under a request-rate ceiling (`--max-request-rate R`).

A start is a request's intended send time (`t_intended_ns`): when the gate let its slot go.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.record_table import RecordTable
from loadgen.record import Record

NS = 1e9


def starts_ns(recs: Sequence[Record] | RecordTable) -> np.ndarray:
    """The starts (t_intended_ns) of every measured request, ascending."""
    return np.sort(RecordTable.of(recs).ints("t_intended_ns"))


def peak_starts_per_s(recs: Sequence[Record] | RecordTable) -> int:
    """The most starts in any 1 s window [t, t + 1 s] (t_intended_ns of every measured request)."""
    starts = starts_ns(recs)
    in_window = np.searchsorted(starts, starts + int(NS), side="right") - np.arange(len(starts))
    return int(in_window.max()) if len(starts) else 0


def throttled_request_rate(recs: Sequence[Record] | RecordTable) -> float | None:
    """Achieved request rate under a ceiling, in requests/s: the starts in the whole seconds after the first
    start, [t0, t0 + m s) with m = ⌊last start − t0⌋, divided by m.

    Whole seconds, because a ceiling of R per 1 s window lets starts come in bursts of R: bursts and evenly
    spaced starts at the ceiling both read R (n − 1 gaps over the span would read bursts high). None when
    the starts span less than 1 s."""
    starts = starts_ns(recs)
    m = (int(starts[-1]) - int(starts[0])) // int(NS) if len(starts) else 0
    if m < 1:
        return None
    return int(np.searchsorted(starts, int(starts[0]) + m * int(NS), side="left")) / m


def throttle_figures(recs: Sequence[Record] | RecordTable, max_rate: float, waited_ns: int, waits: int,
                     slots: int, span_s: float) -> dict:
    """{max_request_rate, achieved_request_rate, peak_starts_per_s, throttled_s, throttled_fraction,
    throttled_starts}: throttled_s = Σ time slots waited for the gate before a start (slot-seconds),
    throttled_fraction = throttled_s / (slots × span_s), span_s = from the measured load's start (slots may
    wait before the first send) to its last request's end."""
    throttled_s = waited_ns / NS
    t = RecordTable.of(recs)
    return {"max_request_rate": max_rate, "achieved_request_rate": throttled_request_rate(t),
            "peak_starts_per_s": peak_starts_per_s(t), "throttled_s": throttled_s,
            "throttled_fraction": throttled_s / (slots * span_s) if slots and span_s > 0 else None,
            "throttled_starts": waits}
