"""The `Driver` of `--workers` cells: warmup and measured load of each closed-loop cell run over a pool's parts,
and what the parts add to the cell's findings (each part's client figures, a part that died). It is its own
module because it is the seam the runner sees: `ray_driver.RayDriver` extends it over a `ray_pool.RayPool`,
and neither needs to know how the other's parts are started."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.record_table import RecordTable
from loadgen.names import Phase
from loadgen.parallel.workers import WorkerPool
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.run.drivers import Driver
from loadgen.schedule.cell_run import CellRun


class WorkerDriver:
    """Closed-loop cells over the pool's worker processes, warmup and measured load alike; after a worker
    died, later cells run in this process through the inner driver."""

    def __init__(self, inner: Driver, pool: WorkerPool):
        self.inner = inner
        self.pool = pool
        self.per_worker: dict[CellKey, list[dict]] = {}

    def planned_requests(self, cell: CellKey) -> int:
        return self.inner.planned_requests(cell)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            await self.inner.warm_up(run, cell)
            return
        warmup = run.phase(Phase.WARMUP)
        if warmup.jobs_left():
            await self.pool.run_cell(warmup, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            await self.inner.drive(run, cell)
            return
        self.per_worker[run.cell] = await self.pool.run_cell(run.phase(Phase.MEASURE), cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        """The inner driver's figures, each worker's client health (`client_health.merge_client`), a death."""
        found = self.inner.finish(cell, measured)
        per_worker = self.per_worker.pop(cell, None)
        if per_worker is not None:
            found += CellFindings(workers=tuple(per_worker))
        if cell in self.pool.problems:
            why = "; ".join(self.pool.problems.pop(cell))
            found += CellFindings(incidents=(Incident(IncidentKind.WORKER_DIED, f"{why}: the cell stopped early"),),
                                  warnings=(f"{why}; later cells run in the main process",))
        return found
