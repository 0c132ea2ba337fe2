"""Which configuration of a cell is best at a figure: only one that may be best (`cell_status.not_best`), and
only beyond noise (disjoint 95 % intervals, `metrics/confidence.py`); compare and the report mark what it marks."""

from __future__ import annotations

from loadgen.metrics.confidence import overlap


def _beyond_noise(leader: dict, other: dict, m: str) -> bool:
    """The leader's figure `m` is better than the other's beyond noise: their 95 % intervals are disjoint
    (a figure without an interval: the values differ)."""
    a, b = leader["intervals"].get(m), other["intervals"].get(m)
    if a is None or b is None:
        return leader[m] != other[m]
    return not overlap(a, b)


def mark_best(group: list[dict], metrics: dict[str, str]) -> None:
    """Mark, per metric (`metrics`: its name → "high" or "low", which is better), the best row of one cell: the best value among the rows that may be best
    (`not_best` None), when it is alone there and beyond noise of every other row's value (`_beyond_noise`);
    else the leaders and the rows within their noise are marked `noise` and nothing is best."""
    for m, better in metrics.items():
        valued = [r for r in group if r[m] is not None]
        allowed = [r for r in valued if not r["not_best"]]
        if len(valued) < 2 or not allowed:
            continue
        pick = max if better == "high" else min
        top = pick(r[m] for r in allowed)
        leaders = [r for r in allowed if r[m] == top]
        close = [r for r in valued if r not in leaders and not _beyond_noise(leaders[0], r, m)]
        if close or len(leaders) > 1:  # a tie is no win either
            for r in leaders + close:
                r["noise"].append(m)
        else:
            for r in leaders:
                r["best"].append(m)
