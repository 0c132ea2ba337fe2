"""The interactivity–throughput picture as plain data (pure; tested without matplotlib): per prompt length and
configuration, one point per concurrency (x = mean per-request tok/s, y = aggregate output tok/s), whether its
cell met its SLO, the checks it failed, and the Pareto frontier over every configuration's points.

A point is on the frontier when no other point of the same prompt length is at least as good in both figures
and better in one: no configuration and concurrency gives more interactivity and more throughput at once.
Measured closed-loop cells only (`cell_status.measured`); the frontier joins those that passed their checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.report.compare import Run
from loadgen.results.cell_status import check_names, measured


@dataclass(frozen=True)
class Point:
    config: str
    concurrency: int
    request_tok_s: float  # interactivity: mean per-request decode tok/s
    output_tok_s: float  # throughput: aggregate output tok/s
    met: bool | None  # the cell met its SLO (None: measured without targets)
    checks: str = ""  # the checks the cell failed ('garbage output, missed SLO'; '' when it passed them)


def points(runs: list[Run]) -> dict[int, list[Point]]:
    """{context: [Point, …]}, in configuration then concurrency order."""
    out: dict[int, list[Point]] = {}
    for r in runs:
        for key, c in sorted(r.cells.items()):
            x, y = (c.throughput.request_tok_s or {}).get("mean"), c.throughput.output_tok_s
            if key[2] is None and measured(c) and x and y:
                met = c.slo.met if c.slo is not None else None
                out.setdefault(key[0], []).append(Point(r.name, key[1], x, y, met, check_names(c)))
    return out


def frontier(pts: list[Point]) -> list[Point]:
    """The Pareto-optimal points, by rising interactivity (so throughput falls along them)."""
    best = [p for p in pts if not any(_dominates(q, p) for q in pts)]
    return sorted(best, key=lambda p: (p.request_tok_s, -p.output_tok_s))


def _dominates(q: Point, p: Point) -> bool:
    return (q.request_tok_s >= p.request_tok_s and q.output_tok_s >= p.output_tok_s
            and (q.request_tok_s > p.request_tok_s or q.output_tok_s > p.output_tok_s))


def targets_of(runs: list[Run]) -> dict[str, float]:
    """The SLO targets the cells were measured with (the first found; {} without any)."""
    return next((c.slo.targets_s for r in runs for c in r.cells.values() if c.slo and c.slo.targets_s), {})
