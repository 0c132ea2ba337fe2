"""Which configuration of a cell is best at a figure, by the verdict's rule (`verdict.decide`): among the rows
that may be best (`cell_status.not_best`), the leader when its margin over every other is beyond noise and at
least the resolution; else the tied set. Compare and the report mark what it marks, so a table never names a
best that the verdict calls a tie."""

from __future__ import annotations

from collections.abc import Mapping

from loadgen.names import Better
from loadgen.results.verdict import RESOLUTION, BetweenRuns, Decision, Estimate, decide

NO_CONTROLS = BetweenRuns(None, 0)


def _judged(row: dict, m: str) -> tuple[float, tuple[float, float] | None]:
    """The figure `m` as the verdict judges it (`judged`: output tok/s sustained) and its interval."""
    value, interval = row.get("judged", {}).get(m) or (row[m], row["intervals"].get(m))
    return value, None if interval is None else (float(interval[0]), float(interval[1]))


def _estimate(row: dict, m: str, between: BetweenRuns) -> Estimate:
    """The row's figure `m` as the verdict's estimate: its interval (a figure no row has an interval for, power,
    taken as exact) widened by the noise between runs."""
    value, interval = _judged(row, m)
    return Estimate(row["config"], value, between.widen(value, interval or (value, value)), (value,))


def mark_best(group: list[dict], metrics: Mapping[str, Better], resolution: float = RESOLUTION,
              between: Mapping[str, BetweenRuns] | None = None) -> None:
    """Mark, per metric (`metrics`: its name → which way is better, HIGH or LOW), the rows of one cell: `best`
    for the winner, `noise` for every row of a tie; rows that may not be best are left unmarked. `between`: the
    noise between runs of each metric (`verdict.BetweenRuns`), as the verdict adds it."""
    for m, better in metrics.items():
        allowed = [r for r in group if r[m] is not None and (_judged(r, m)[0] or 0) > 0 and not r["not_best"]]
        if len(allowed) < 2:
            continue
        higher = better is Better.HIGH
        ranked = sorted(allowed, key=lambda r: _judged(r, m)[0], reverse=higher)
        noise = (between or {}).get(m, NO_CONTROLS)
        decision, tied, _, _ = decide([_estimate(r, m, noise) for r in ranked], higher, resolution)
        if decision is Decision.WINS:
            ranked[0]["best"].append(m)
        for r in ranked:
            if r["config"] in tied:
                r["noise"].append(m)
