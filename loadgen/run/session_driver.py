"""The multi-turn session driver (`--dataset FILE --sessions`): C session slots per cell
(`schedule.sessions.session_loop`); warmup sessions run to completion before the measured window opens.

A cell's planned count is of sessions (`--requests-per-cell`, default every row once); each session sends one
request per user turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.config import CellSize
from loadgen.metrics.record_table import RecordTable
from loadgen.names import Phase
from loadgen.record import CellKey, Record
from loadgen.results.findings import NOTHING, CellFindings
from loadgen.run.transport import Transport
from loadgen.schedule.cell_run import CellRun
from loadgen.schedule.sessions import session_loop


class SessionLoop:
    def __init__(self, size: CellSize, transport: Transport):
        self.size = size
        self.transport = transport

    def planned_requests(self, cell: CellKey) -> int:
        """Sessions the cell plans: --requests-per-cell (the dataset's rows by default)."""
        return self.size.requests_for(cell.concurrency)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        warmup = run.phase(Phase.WARMUP)
        if warmup.jobs_left():
            await self.transport.warm(cell.concurrency)
            await session_loop(warmup, cell.concurrency)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self.transport.warm(cell.concurrency)
        await session_loop(run.phase(Phase.MEASURE), cell.concurrency)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        """Nothing of its own: the session figures come from the records (`metrics.sessions`)."""
        return NOTHING
