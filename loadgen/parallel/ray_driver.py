"""The driver of `--ray` cells: `worker_driver.WorkerDriver` over a `ray_pool.RayPool`, with what a lost part means
for a cell (a `worker_lost` incident naming its node; the next cells on the parts left, or skipped when none
is left) and which parts ran it (the results' `ray.cells`)."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.record_table import RecordTable
from loadgen.parallel.ray_pool import RayPool
from loadgen.parallel.worker_driver import WorkerDriver
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.run.drivers import Driver
from loadgen.schedule.cell_run import CellRun

NONE_LEFT = "not measured: every Ray part was lost"


class RayDriver(WorkerDriver):
    """Closed-loop cells over the Ray parts (warmup and measured load alike)."""

    pool: RayPool

    def __init__(self, inner: Driver, pool: RayPool):
        super().__init__(inner, pool)
        self.none_left: set[CellKey] = set()

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            self.none_left.add(run.cell)
            return
        await super().warm_up(run, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            self.none_left.add(run.cell)
            return
        await super().drive(run, cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        """`WorkerDriver.finish`'s findings, and what the Ray parts add: which ran the cell, the parts lost in
        it (or before it), and a cell no part was left to run."""
        found = super().finish(cell, measured)
        pool = self.pool
        pool.section.setdefault("cells", []).append({"cell": cell.as_dict(), "parts": pool.ran.pop(cell, [])})
        warnings = [f"{why} (before this cell)" for why in pool.dropped]
        pool.dropped.clear()
        incidents = [Incident(IncidentKind.WORKER_LOST, f"{why}: its requests in flight failed, its unsent ones "
                                                        "were not sent, and the cell stopped")
                     for why in pool.lost.pop(cell, [])]
        if incidents:
            left = len(pool.parts)
            warnings.append(f"later cells run on the {left} Ray parts left" if left else
                            "no Ray part is left: later cells are skipped")
        if cell in self.none_left:
            self.none_left.discard(cell)
            incidents.append(Incident(IncidentKind.NOT_REACHED, NONE_LEFT))
        return found + CellFindings(incidents=tuple(incidents), warnings=tuple(warnings))
