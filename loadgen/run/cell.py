"""One attempt at one cell: prompts → jobs → warmup → measured load (telemetry and self-monitoring open)
→ the cell's entry in the results.

Every record goes to every sink as its request ends; the measured ones are also kept (compact) until the
cell's summary. The entry's formulas live in `loadgen.metrics`; the driver adds its own figures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import aiohttp

from loadgen.client.api import RequestOptions
from loadgen.config import RunConfig
from loadgen.metrics import telemetry as cell_telemetry
from loadgen.metrics.cell import summarize
from loadgen.names import Phase
from loadgen.record import CellKey, Record
from loadgen.results.cell_status import DEFAULT_MAX_FAILED_FRACTION, judge
from loadgen.run.control import RunControl
from loadgen.run.drivers import Driver
from loadgen.run.monitor import LoopMonitor
from loadgen.run.progress import Progress
from loadgen.run.transport import Transport
from loadgen.schedule.cell_run import CellRun, LoadOutcome, StopToken
from loadgen.schedule.jobs import JobList
from loadgen.sinks.base import Sink
from loadgen.telemetry.base import SourceResult, TelemetrySource
from loadgen.workload.prompts import PromptBuilder

DURATION_JOBS = 1_000_000  # a duration-bound cell plans "enough" jobs; JobList builds them on demand
SourceFactory = Callable[[], TelemetrySource]


def assemble(cell: CellKey, summary: dict, results: Sequence[SourceResult],
             max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION) -> dict:
    """The cell's entry: client figures, accept length, power, each source's own values, status
    (`cell_status.judge`: failed when more than `max_failed_fraction` of its requests failed)."""
    entry = cell.as_dict() | summary
    entry["accept_length"] = cell_telemetry.accept_length(summary, results)
    entry["power"] = cell_telemetry.power(results, summary["output_tokens"], summary["duration_s"],
                                          summary.get("window_ns"))
    entry["telemetry"] = {r.name: {"available": r.available, "reason": r.reason, **r.values} for r in results}
    entry["warnings"] = [w for r in results for w in r.warnings]
    judge(entry, max_failed_fraction)
    return entry


def empty_entry(cell: CellKey) -> dict:
    """The entry of a cell that ended before any request was sent."""
    return assemble(cell, summarize([]) | {"client": None}, [])


class CellMeasurer:
    """Measures cells of one run with the parts it is given."""

    def __init__(self, cfg: RunConfig, run_id: str, prompts: PromptBuilder, driver: Driver, transport: Transport,
                 sinks: list[Sink], telemetry: list[SourceFactory], control: RunControl, progress: Progress):
        self.cfg = cfg
        self.run_id = run_id
        self.prompts = prompts
        self.driver = driver
        self.transport = transport
        self.sinks = sinks
        self.telemetry = telemetry
        self.control = control
        self.progress = progress
        self.model = prompts.model

    async def jobs(self, cell: CellKey) -> JobList:
        """Warmup and measured jobs; a duration-bound cell reuses its sized prompts under new numbers."""
        cfg = self.cfg
        planned = self.driver.planned_requests(cell)
        n_total = cfg.warmup + (max(planned, DURATION_JOBS) if cfg.duration_per_cell_s else planned)
        opts = RequestOptions(model=self.model, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                              ignore_eos=cfg.ignore_eos)
        bodies, categories = await self.prompts.bodies(cell, min(n_total, planned + cfg.warmup), opts)
        return JobList(bodies, n_total, cfg.warmup, categories=categories)

    def cell_run(self, session: aiohttp.ClientSession, cell: CellKey, jobs: JobList, attempt: int,
                 measured: list[Record], stop: StopToken) -> CellRun:
        def on_record(rec: Record) -> None:
            rec.category = jobs.category(rec.seq)
            for s in self.sinks:
                s.record(rec)
            if rec.phase == Phase.MEASURE:
                measured.append(rec.compact())  # kept until the summary: per-chunk lists as machine ints
            self.progress.add(rec)

        def on_sent() -> None:
            for s in self.sinks:
                s.request_sent(cell)

        deadline = None
        if self.cfg.duration_per_cell_s:
            deadline = time.monotonic_ns() + int(self.cfg.duration_per_cell_s * 1e9)
        return CellRun(self.run_id, cell, jobs, self.transport.sender(session), on_sent, on_record, deadline,
                       attempt=attempt, warmup=self.cfg.warmup, stop=stop)

    async def measure(self, session: aiohttp.ClientSession, cell: CellKey, attempt: int = 0,
                      stop: StopToken | None = None) -> tuple[dict, LoadOutcome]:
        """One attempt at the cell, its load stopped early through `stop`: its entry, and what its load did."""
        jobs = await self.jobs(cell)
        measured: list[Record] = []
        run = self.cell_run(session, cell, jobs, attempt, measured, stop or StopToken(self.control.token))
        await self.transport.before_cell(session, cell, len(jobs))
        for s in self.sinks:
            s.cell_started(cell, self.run_id)
        self.progress.reset(cell.label(), 0 if self.cfg.duration_per_cell_s else len(jobs))
        await self.driver.warm_up(run, cell)
        summary, results = await self.measured_window(run, cell, measured)
        entry = assemble(cell, summary, results, self.cfg.max_failed_fraction)
        self.driver.finish(cell, entry, measured)
        return entry, run.cell_outcome()

    async def measured_window(self, run: CellRun, cell: CellKey, measured: list[Record]):
        """The measured load with telemetry and self-monitoring open around it; (summary, source results)."""
        sources = [f() for f in self.telemetry]
        monitor = LoopMonitor()
        monitor.start()
        for src in sources:
            await src.start()
        drawer = asyncio.create_task(self.progress.redraw())
        try:
            load = asyncio.ensure_future(self.driver.drive(run, cell))
            self.control.loading_cell(load, run.cell_outcome)
            # a second interrupt cancels the load (in-flight requests are recorded as cancelled); the cell is
            # still summarised and saved
            await asyncio.wait([load])
            if not load.cancelled():
                load.result()
        finally:
            drawer.cancel()
            self.progress.clear()
            results = [await src.stop() for src in sources]
        summary = summarize(measured)
        lateness_p99 = summary["send_lateness_s"].get("p99") if cell.request_rate is not None else None
        summary["client"] = await monitor.stop(lateness_p99)
        return summary, results
