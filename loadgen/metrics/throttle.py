"""Figures of a closed-loop cell under a request-rate ceiling (`--max-request-rate R`).

A start is a request's intended send time (`t_intended_ns`): when the gate let its slot go.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from loadgen.record import Record

NS = 1e9


def peak_starts_per_s(recs: Sequence[Record]) -> int:
    """The most starts in any 1 s window [t, t + 1 s] (t_intended_ns of every measured request)."""
    starts = sorted(r.t_intended_ns for r in recs)
    return max((bisect_right(starts, t + int(NS)) - i for i, t in enumerate(starts)), default=0)


def throttled_request_rate(recs: Sequence[Record]) -> float | None:
    """Achieved request rate under a ceiling, in requests/s: the starts in the whole seconds after the first
    start, [t0, t0 + m s) with m = ⌊last start − t0⌋, divided by m.

    Whole seconds, because a ceiling of R per 1 s window lets starts come in bursts of R: bursts and evenly
    spaced starts at the ceiling both read R (n − 1 gaps over the span would read bursts high). None when
    the starts span less than 1 s."""
    starts = sorted(r.t_intended_ns for r in recs)
    m = (starts[-1] - starts[0]) // int(NS) if starts else 0
    if m < 1:
        return None
    return bisect_left(starts, starts[0] + m * int(NS)) / m


def throttle_figures(recs: Sequence[Record], max_rate: float, waited_ns: int, waits: int, slots: int,
                     span_s: float) -> dict:
    """{max_request_rate, achieved_request_rate, peak_starts_per_s, throttled_s, throttled_fraction,
    throttled_starts}: throttled_s = Σ time slots waited for the gate before a start (slot-seconds),
    throttled_fraction = throttled_s / (slots × span_s), span_s = from the measured load's start (slots may
    wait before the first send) to its last request's end."""
    throttled_s = waited_ns / NS
    return {"max_request_rate": max_rate, "achieved_request_rate": throttled_request_rate(recs),
            "peak_starts_per_s": peak_starts_per_s(recs), "throttled_s": throttled_s,
            "throttled_fraction": throttled_s / (slots * span_s) if slots and span_s > 0 else None,
            "throttled_starts": waits}
