"""A run whose cells are parts of a load, each of the size its plan gives (`loadgen tune`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loadgen.metrics.record_table import RecordTable
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.run.drivers import Driver
from loadgen.schedule.cell_run import CellRun


class PartSizes:
    """The run's driver, with each cell's measured requests exactly what `requests` says (0: the driver's own,
    the matrix's size); every other call forwarded as it is. An open loop's schedule is drawn for the matrix's
    size and its cell ends when the part's requests have gone."""

    def __init__(self, inner: Driver, requests: Callable[[CellKey], int]):
        self.inner, self.requests = inner, requests

    def planned_requests(self, cell: CellKey) -> int:
        return self.requests(cell) or self.inner.planned_requests(cell)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.warm_up(run, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.drive(run, cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        return self.inner.finish(cell, measured)
