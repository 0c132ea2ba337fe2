"""The trace-replay driver (`--trace`): request i of a cell is due at t0 + (timestamp_i − timestamp_0) / speed,
whatever the server does (open loop, `schedule.open.open_loop`), `--max-concurrency` capping what is in flight.

Each cell replays the whole trace at one `--trace-speed`; its key's rate is the trace's mean rate at that speed
(`Trace.mean_rate`), so the open-loop figures (send lateness, scheduled and achieved rates) and table apply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from loadgen.config import TraceConfig
from loadgen.metrics.record_table import RecordTable
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.run.transport import Transport
from loadgen.schedule.cell_run import CellRun
from loadgen.schedule.open import open_loop
from loadgen.workload.trace import Trace

NS = 1e9


class TraceReplay:
    """Sends a trace's rows at their timestamps; `trace` is the loaded file (its rows in timestamp order)."""

    def __init__(self, opts: TraceConfig, transport: Transport, trace: Trace):
        self.opts = opts
        self.transport = transport
        self.trace = trace

    def planned_requests(self, cell: CellKey) -> int:
        return len(self.trace.rows)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """Nothing: a trace has no warmup (its first rows are part of its load)."""

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self.transport.warm(min(len(self.trace.rows), self.opts.trace_max_concurrency or 64))
        offsets = self.trace.offsets_s(self.opts.speed_of(cell.request_rate))
        t0 = time.monotonic_ns()
        await open_loop(run.untimed(), [t0 + round(o * NS) for o in offsets], self.opts.trace_max_concurrency)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        t = self.opts
        return CellFindings(load={"target_request_rate": cell.request_rate,
                                  "arrival": {"law": "trace", "trace": t.trace, "speed": t.speed_of(cell.request_rate),
                                              "max_concurrency": t.trace_max_concurrency}})
