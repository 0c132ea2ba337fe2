"""Figures of open-loop cells and ramps, from records: one function per metric, the formula in its docstring.

Request i of a rate cell is due at t0 + offset_i (`loadgen.schedule.arrivals`); `t_intended_ns` is that due
time. The ramp verdict finds the sustainable request rate: where TTFT p99 (from the intended send) first
crosses the SLO in a sliding window.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadgen.metrics.counts import scheduled
from loadgen.metrics.record_table import NONE, RecordTable
from loadgen.metrics.request import latency_s
from loadgen.metrics.stats import percentile
from loadgen.record import Record

NS = 1e9
MIN_WINDOW_REQUESTS = 10  # a ramp window with fewer requests is not judged (its p99 would be its max)
MIN_RAMP_REQUESTS = 2 * MIN_WINDOW_REQUESTS


def schedule_request_rate(recs: Sequence[Record] | RecordTable) -> float | None:
    """Realised rate of the schedule = (n − 1) / (max t_intended − min t_intended), measured records."""
    intended = RecordTable.of(recs).ints("t_intended_ns")
    if len(intended) < 2:
        return None
    span = int(intended.max()) - int(intended.min())
    return (len(intended) - 1) * NS / span if span > 0 else None


def achieved_request_rate(recs: Sequence[Record] | RecordTable) -> float | None:
    """Achieved request rate = (n − 1) / (max t_sent − min t_sent) over the measured records that were sent
    (every outcome counts: a request that failed still arrived at the server).

    n − 1 gaps over the span of actual sends, the same estimator as `schedule_request_rate`, so a client that
    keeps up reads the schedule's rate exactly, and one that sends late (cap full, event loop busy) reads
    lower: the sends stretch over a longer span. Completions per second is a different figure (throughput)."""
    sent = RecordTable.of(recs).ints("t_sent_ns")
    sent = sent[(sent != 0) & (sent != NONE)]
    if len(sent) < 2:
        return None
    span = int(sent.max()) - int(sent.min())
    return (len(sent) - 1) * NS / span if span > 0 else None


def achieved_request_rate_of(achieved: float | None, requests: Mapping[str, Any],
                             duration_s: float | None) -> float | None:
    """A cell's achieved request rate: its stored `achieved_request_rate` (`achieved_request_rate` over its
    records, set for every open-loop cell). A cell without it (hand-made, or from before the figure was
    stored) gives the nearest figure it holds, requests ended / duration_s: n over the whole measured
    window instead of n − 1 over the span of sends, an approximation."""
    if achieved is not None:
        return achieved
    if not duration_s or (requests or {}).get("ok") is None:
        return None
    return scheduled(requests) / duration_s


def corrected_ttft_s(recs: Sequence[Record] | RecordTable) -> np.ndarray:
    """TTFT from the intended send, for the SLO, of every record: t_first_token − t_intended; +inf when the
    request did not succeed or no token came."""
    t = RecordTable.of(recs)
    first, intended = t.ints("t_first_token_ns"), t.ints("t_intended_ns")
    came = t.ok_mask() & (first != NONE)
    out = np.full(len(t), math.inf)
    out[came] = latency_s(first[came], intended[came])
    return out


# ---- ramp: the sustainable rate -------------------------------------------------------------------------
@dataclass(frozen=True)
class Ramp:
    r0: float
    r1: float
    duration_s: float

    def rate_at(self, t_s: float) -> float:
        """Target rate of the ramp at t: r(t) = r0 + (r1 − r0)·t/S, t clamped to [0, S] (the derivative of the
        schedule's Λ(t), `schedule.arrivals.ramp_cumulative`)."""
        t = min(max(t_s, 0.0), self.duration_s)
        return self.r0 + (self.r1 - self.r0) * t / self.duration_s

    @property
    def mean_rate(self) -> float:
        """Mean target rate of the ramp = Λ(S)/S = (r0 + r1)/2."""
        return (self.r0 + self.r1) / 2


def window_p99(t_s: Sequence[float], ttft_s: Sequence[float], end_s: float,
               window_s: float) -> tuple[float, int]:
    """(p99, n) of TTFT over the requests intended in (end − window, end] (`t_s` ascending); p99 is +inf when
    a failed request reaches the top 1 %, nan when the window is empty."""
    vals = ttft_s[bisect_right(t_s, end_s - window_s):bisect_right(t_s, end_s)]
    if not vals:
        return math.nan, 0
    with np.errstate(invalid="ignore"):
        p = percentile(vals, 99)
    assert p is not None  # vals is not empty
    return (math.inf if math.isnan(p) else p), len(vals)  # inf − inf interpolates to nan: a failure, so inf


def sustainable_rate(t_s: Sequence[float], ttft_s: Sequence[float], ramp: Ramp, slo_s: float, window_s: float,
                     min_requests: int = MIN_WINDOW_REQUESTS) -> dict:
    """Where TTFT p99 first crossed the SLO on a ramp, and the offered rate that was still sustained.

    Input: per measured request, its intended send time t (s from the ramp start, ascending) and its TTFT from
    the intended send (+inf when it failed). Sliding window: at each request j, W_j = the requests with
    t in (t_j − window_s, t_j]; W_j is judged when it holds ≥ `min_requests` requests (fewer would make its
    p99 its maximum) and breaches when p99(W_j) > slo_s (p99: linear interpolation between order statistics).
    With j* the first breaching window: `sustainable_request_rate` = r(t_{j*−1}), the ramp's target rate at
    the last request before it. None when the first judged window already breached (lower R0); r(t_last)
    with `held` = True when no window breached (a lower bound: raise R1).
    """
    out: dict[str, Any] = {"sustainable_request_rate": None, "held": False, "crossed_at_s": None, "rate_at_cross": None,
           "ttft_p99_at_cross_s": None, "windows_judged": 0}
    for j in range(len(t_s)):
        p99, n = window_p99(t_s, ttft_s, t_s[j], window_s)
        if n < min_requests:
            continue
        out["windows_judged"] += 1
        if p99 > slo_s:
            out.update(crossed_at_s=t_s[j], rate_at_cross=ramp.rate_at(t_s[j]),
                       ttft_p99_at_cross_s=p99 if math.isfinite(p99) else None)
            if out["windows_judged"] > 1:
                out["sustainable_request_rate"] = ramp.rate_at(t_s[j - 1])
            return out
    if out["windows_judged"]:
        out.update(sustainable_request_rate=ramp.rate_at(t_s[-1]), held=True)
    return out


def ramp_series(t_s: Sequence[float], ttft_s: Sequence[float], ramp: Ramp, window_s: float) -> list[dict]:
    """The sliding window on a grid every window/2 s (for plots): target rate and TTFT p99 at each end."""
    out = []
    end = window_s
    while end <= ramp.duration_s + 1e-9:
        p99, n = window_p99(t_s, ttft_s, end, window_s)
        out.append({"t_s": round(end, 6), "target_request_rate": ramp.rate_at(end), "requests": n,
                    "ttft_p99_s": p99 if math.isfinite(p99) else None})
        end += window_s / 2
    return out
