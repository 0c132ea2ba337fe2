"""One attempt at one cell: prompts → jobs → warmup → measured load (telemetry and self-monitoring open)
→ the cell's result (`results.build_cell`).

Every record goes to every sink as its request ends; the measured ones are also kept until the cell's result
is built, their chunks folded and moved to disk (`chunk_spill.CellRecords`: memory does not grow with the
chunks of a long cell). Its formulas live in `loadgen.metrics`; the driver returns its own figures to the
builder (`Driver.finish`), as the verifier its verification records (`Verifier.verification`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

import aiohttp

from loadgen.client.api import RequestOptions
from loadgen.config import RunConfig
from loadgen.metrics.cell import send_lateness
from loadgen.names import Phase, SloMetric
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_result import CellResult
from loadgen.run.chunk_spill import CellRecords
from loadgen.run.control import RunControl
from loadgen.run.drivers import Driver
from loadgen.run.monitor import LoopMonitor
from loadgen.run.progress import Progress
from loadgen.run.transport import Transport
from loadgen.schedule.cell_run import CellRun, LoadOutcome, StopToken
from loadgen.schedule.jobs import Inserted, JobList
from loadgen.schedule.sessions import turns
from loadgen.sinks.base import Sink
from loadgen.telemetry.base import TelemetrySource
from loadgen.verify.verifier import Verifier, VerifyingSender
from loadgen.workload.dataset import DatasetPrompts
from loadgen.workload.prompts import PromptBuilder
from loadgen.workload.sessions import SessionPrompts
from loadgen.workload.trace_prompts import TracePrompts

Prompts = PromptBuilder | DatasetPrompts | TracePrompts | SessionPrompts  # what `setup.size_prompts` gives a run

DURATION_JOBS = 1_000_000  # a duration-bound cell plans "enough" jobs; JobList builds them on demand
SourceFactory = Callable[[], TelemetrySource]


def prompts_under(prompts: Prompts, run_id: str) -> Prompts:
    """The same prompts under another run id (its unique prefixes follow it); a session plan's is its rows'."""
    if isinstance(prompts, SessionPrompts):
        return dataclasses.replace(prompts, rows=dataclasses.replace(prompts.rows, run_id=run_id))
    return dataclasses.replace(prompts, run_id=run_id)


class CellMeasurer:
    """Measures cells of one run with the parts it is given."""

    def __init__(self, cfg: RunConfig, run_id: str, prompts: Prompts, driver: Driver, transport: Transport,
                 sinks: list[Sink], telemetry: list[SourceFactory], control: RunControl, progress: Progress,
                 verifier: Verifier | None = None):
        self.cfg = cfg
        self.run_id = run_id
        self.prompts = prompts
        self.driver = driver
        self.transport = transport
        self.sinks = sinks
        self.telemetry = telemetry
        self.control = control
        self.progress = progress
        self.verifier = verifier
        self.model = prompts.model

    def under(self, run_id: str) -> CellMeasurer:
        """A twin with the run's parts, shared, measuring under another run id (its prompts' prefixes too)."""
        return CellMeasurer(self.cfg, run_id, prompts_under(self.prompts, run_id), self.driver,
                            self.transport, self.sinks, self.telemetry, self.control, self.progress, self.verifier)

    async def jobs(self, cell: CellKey) -> JobList | Inserted:
        """Warmup and measured jobs (and the verification jobs, `--verify`); a duration-bound cell reuses its
        sized prompts under new numbers."""
        cfg = self.cfg
        planned = self.driver.planned_requests(cell)
        n_total = cfg.warmup + (max(planned, DURATION_JOBS) if cfg.duration_per_cell_s else planned)
        opts = RequestOptions(model=self.model, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                              ignore_eos=cfg.ignore_eos)
        bodies, categories = await self.prompts.bodies(cell, min(n_total, planned + cfg.warmup), opts)
        jobs = JobList(bodies, n_total, cfg.warmup, categories=categories)
        return self.verifier.jobs(jobs, cfg.warmup) if self.verifier is not None else jobs

    def cell_run(self, session: aiohttp.ClientSession, cell: CellKey, jobs: JobList | Inserted, attempt: int,
                 measured: CellRecords, stop: StopToken, repeat: int = 0,
                 verified: list[Record] | None = None) -> CellRun:
        def on_record(rec: Record) -> None:
            rec.category = None if rec.phase == Phase.VERIFY else \
                jobs.category(rec.seq if rec.session is None else rec.session)
            rec.repeat = repeat
            for s in self.sinks:
                s.record(rec)
            if rec.phase == Phase.MEASURE:
                measured.keep(rec)
            elif rec.phase == Phase.VERIFY and verified is not None:
                verified.append(rec)
            self.progress.add(rec)

        def on_sent() -> None:
            for s in self.sinks:
                s.request_sent(cell)

        deadline = duration = None
        if self.cfg.duration_per_cell_s:
            duration = int(self.cfg.duration_per_cell_s * 1e9)
            deadline = time.monotonic_ns() + duration
        send = self.transport.sender(session)
        if self.verifier is not None:
            send = VerifyingSender(send, self.verifier, session)
        return CellRun(self.run_id, cell, jobs, send, on_sent, on_record, deadline,
                       attempt=attempt, warmup=self.cfg.warmup, stop=stop, duration_ns=duration)

    async def measure(self, session: aiohttp.ClientSession, cell: CellKey, attempt: int = 0,
                      stop: StopToken | None = None, repeat: int = 0) -> tuple[CellResult, LoadOutcome]:
        """One attempt at the cell (its `repeat`-th measurement), its load stopped early through `stop`: its
        result, and what its load did."""
        jobs = await self.jobs(cell)
        # an ITL target judges each request by its own chunks after the load: such a cell keeps them
        measured = CellRecords(keep_chunks=SloMetric.ITL in self.cfg.slo.slo_targets)
        try:
            return await self._measure(session, cell, jobs, attempt, measured, stop, repeat)
        finally:
            measured.close()

    async def _measure(self, session: aiohttp.ClientSession, cell: CellKey, jobs: JobList | Inserted,
                       attempt: int, measured: CellRecords, stop: StopToken | None,
                       repeat: int) -> tuple[CellResult, LoadOutcome]:
        verified: list[Record] = []
        run = self.cell_run(session, cell, jobs, attempt, measured, stop or StopToken(self.control.token), repeat,
                            verified)
        await self.transport.before_cell(session, cell, len(jobs))
        for s in self.sinks:
            s.cell_started(cell, self.run_id)
        total = turns(jobs) if self.cfg.workload.sessions else len(jobs)  # a session sends one request a turn
        self.progress.reset(cell.label(), 0 if self.cfg.duration_per_cell_s else total)
        await self.driver.warm_up(run, cell)
        results, client = await self.measured_window(run, cell, measured)
        outcome = run.cell_outcome()
        not_sent = 0 if self.cfg.duration_per_cell_s else outcome.measured_not_sent
        records = measured.table()  # columns: no `Record` rebuilt for the summary
        result = build_cell(cell, records, results, client, max_failed_fraction=self.cfg.max_failed_fraction,
                            verification=self.verifier.verification(verified) if self.verifier else None,
                            slo=self.cfg.slo, not_sent=not_sent, shared_prefix=self.cfg.workload.shared_prefix,
                            chunks=measured.fold, arrivals=measured.spill.arrivals,
                            found=self.driver.finish(cell, records))
        return result, outcome

    async def measured_window(self, run: CellRun, cell: CellKey, measured: CellRecords):
        """The measured load with telemetry and self-monitoring open around it; (source results, client
        health)."""
        sources = [f() for f in self.telemetry]
        for src in sources:
            await src.start()
        # the client is judged over its load only: the sources' first and last scrapes are not its work
        monitor = LoopMonitor()
        monitor.start()
        drawer = asyncio.create_task(self.progress.redraw())
        client = None
        try:
            load = asyncio.ensure_future(self.driver.drive(run, cell))
            self.control.loading_cell(load, run.cell_outcome)
            # a second interrupt cancels the load (in-flight requests are recorded as cancelled); the cell is
            # still summarised and saved
            await asyncio.wait([load])
            if not load.cancelled():
                load.result()
            lateness_p99 = send_lateness(measured.table()).get("p99") if cell.request_rate is not None else None
            client = await monitor.stop(lateness_p99)
        finally:
            drawer.cancel()
            if client is None:  # the load raised: the sampler stops with it
                await monitor.stop()
            self.progress.clear()
            results = [await src.stop() for src in sources]
        return results, client
