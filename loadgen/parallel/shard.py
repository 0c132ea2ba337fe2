"""This process's part of every cell (`--shard i/N`), and cells started on the wall clock (`--start-at`,
`--cell-period`), as drivers that wrap another one.

N processes, on one host or many, each started with the same arguments and its own i, together send the
load of one process (the split: `loadgen.schedule.split`). Shards share no coordinator: `--start-at T` waits
before the first cell and `--cell-period S` starts cell k at T + k·S, so they load the server together;
`loadgen merge` combines their results (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from loadgen.console import log
from loadgen.metrics.record_table import RecordTable
from loadgen.names import Phase
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.run.drivers import Driver
from loadgen.schedule.cell_run import CellRun
from loadgen.schedule.split import ShardJobs, slot_counts


class ShardPart:
    """Part `index` of `count` of every closed-loop cell: its slots, and the requests those slots own (of the
    warmup and of the measured jobs, each split on its own)."""

    def __init__(self, inner: Driver, index: int, count: int):
        self.inner = inner
        self.index, self.count = index, count

    def slots(self, cell: CellKey) -> int:
        return slot_counts(cell.concurrency, self.count)[self.index]

    def planned_requests(self, cell: CellKey) -> int:
        return self.inner.planned_requests(cell)

    def part(self, run: CellRun, cell: CellKey) -> CellRun:
        """This part's jobs of the cell's run."""
        return run.split(lambda jobs: ShardJobs(jobs, cell.concurrency, self.count, self.index))

    def narrow(self, cell: CellKey) -> CellKey:
        """The cell as this part's slots see it: its concurrency is theirs."""
        return cell._replace(concurrency=self.slots(cell))

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        part = self.part(run, cell)
        if self.slots(cell) and part.phase(Phase.WARMUP).jobs_left():
            await self.inner.warm_up(part, self.narrow(cell))

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        part = self.part(run, cell)
        if self.slots(cell) and part.phase(Phase.MEASURE).jobs_left():
            await self.inner.drive(part, self.narrow(cell))
        # else this part has no slot in a cell narrower than the shard count, or no job

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        found = self.inner.finish(cell, measured)
        if self.slots(cell):
            return found
        # a cell narrower than the shard count: the other shards send all of it
        why = f"no slot for shard {self.index}/{self.count} in a cell of concurrency {cell.concurrency}"
        return found + CellFindings(load={"shard_has_no_slot": True}, incidents=(Incident(IncidentKind.NO_SLOT, why),))


class AlignedStart:
    """Cell k's measured load starts at `start_at` + k·`period_s` (Unix time); without a period, only the
    first cell waits for `start_at`. The warmup goes as soon as the cell is ready."""

    def __init__(self, inner: Driver, start_at: float, period_s: float | None):
        self.inner = inner
        self.start_at, self.period_s = start_at, period_s
        self.cells_started = 0

    def planned_requests(self, cell: CellKey) -> int:
        return self.inner.planned_requests(cell)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.warm_up(run, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        k = self.cells_started
        self.cells_started += 1
        if self.period_s or k == 0:
            await wait_until(self.start_at + k * (self.period_s or 0), k)
        await self.inner.drive(run, cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        return self.inner.finish(cell, measured)


async def wait_until(t_s: float, k: int) -> None:
    delay = t_s - time.time()
    if delay < 0:
        if k:
            log(f"cell {k} starts {-delay:.1f} s after its --cell-period slot: the previous cell ran over")
        return
    await asyncio.sleep(delay)
