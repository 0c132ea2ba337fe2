"""The knee of a run: the concurrency past which output tok/s stops growing (pure).

For one prompt length and one configuration, with closed-loop cells at concurrencies c_1 < c_2 < … and
aggregate output tok/s T_1, T_2, …, the growth per doubling between neighbours is

    g_i = (T_{i+1} / T_i) ^ (1 / log2(c_{i+1} / c_i)) − 1,

so 1 → 32 → 64 compares like for like whatever the steps. The knee is the first c_i with g_i < KNEE_GROWTH
(10 %): past it, doubling the load buys less than a tenth more throughput (and latency climbs). None when every
step still grew by 10 % or more (the knee lies beyond the largest concurrency measured), or with fewer than two
usable cells.

A concurrency measured more than once (`loadgen search` measures a load again: `again` in the cell) counts with
its first measurement, unless its measurements disagree (output tok/s more than DISAGREE × apart): then it is
left out and named (`left_out`), since either of its figures may be a stall of the server rather than its knee.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

KNEE_GROWTH = 0.10
DISAGREE = 2.0


def growth_per_doubling(c0: int, t0: float, c1: int, t1: float) -> float | None:
    """g = (t1 / t0) ^ (1 / log2(c1 / c0)) − 1; None when either throughput is not positive or c1 ≤ c0."""
    if c1 <= c0 or c0 <= 0 or t0 <= 0 or t1 <= 0:
        return None
    return (t1 / t0) ** (1 / math.log2(c1 / c0)) - 1


def knee(points: Sequence[tuple[int, float]]) -> dict:
    """{knee, growth: [[c_i, c_{i+1}, g_i], …], max_concurrency, left_out: [[c, low, high], …]} from
    (concurrency, output tok/s) points of one prompt length and configuration, in the order measured (the
    first point of a repeated concurrency counts; one whose points disagree is left out)."""
    by_c: dict[int, list[float]] = {}
    for c, t in points:
        by_c.setdefault(c, []).append(t)
    left_out = [[c, min(ts), max(ts)] for c, ts in sorted(by_c.items()) if max(ts) > DISAGREE * min(ts)]
    steps = sorted((c, ts[0]) for c, ts in by_c.items() if max(ts) <= DISAGREE * min(ts))
    growth = [[c0, c1, g] for (c0, t0), (c1, t1) in zip(steps, steps[1:])
              if (g := growth_per_doubling(c0, t0, c1, t1)) is not None]
    at = next((c0 for c0, _, g in growth if g < KNEE_GROWTH), None)
    return {"knee": at, "growth": growth, "max_concurrency": steps[-1][0] if steps else None, "left_out": left_out}


def knees(points: Mapping[int, Sequence[tuple[int, float]]]) -> dict[int, dict]:
    """{context_tokens: knee(...)} from each prompt length's (concurrency, output tok/s) points (a run's usable
    closed-loop cells: `results/knee_text.knee_points`), for the lengths with two or more."""
    return {ctx: knee(p) for ctx, p in sorted(points.items()) if len(p) >= 2}
