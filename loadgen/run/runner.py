"""Runs the matrix: for each prompt length, for each load level, one cell; records flow to the sinks,
telemetry is cut to the cell's window, and the results file is replaced after every cell.

The runner is given all its parts (`RunParts`, built by the CLI): the cell driver (closed loop, open loop,
worker processes, shard), the transport of the measured requests (h1 or aiohttp), the sinks, the telemetry
sources, the server-down policy, the interrupt handler and the services that live as long as the run
(live exporter, log command, worker pool). It knows none of them by name.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import aiohttp

from loadgen.client.aiohttp_sender import make_session
from loadgen.client.config import ClientConfig
from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import ServerError
from loadgen.metrics.drift import Drift
from loadgen.names import CellStatus
from loadgen.record import CellKey, RunAnchor
from loadgen.results.build_cell import amended, unmeasured
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.findings import CellFindings, incident
from loadgen.results.incidents import IncidentKind
from loadgen.results.provenance import wall_clock
from loadgen.results.repeats import combine_repeats
from loadgen.run.cell import CellMeasurer, SourceFactory
from loadgen.run.control import RunControl
from loadgen.run.drift_check import ControlCheck
from loadgen.run.drivers import Driver
from loadgen.run.interrupts import Interrupts
from loadgen.run.progress import Progress
from loadgen.run.remeasure import measure_again
from loadgen.run.server_down import ServerDownPolicy
from loadgen.run.setup import find_target, size_prompts
from loadgen.run.transport import Transport
from loadgen.schedule.cell_run import LoadOutcome, StopToken
from loadgen.sinks.base import Sink
from loadgen.target.discover import Target
from loadgen.verify.verifier import Verifier
from loadgen.workload.tokenizers import sizing_note


class Service(Protocol):
    """Something that lives as long as the run's measurements: started after setup, closed at the end
    (`finished` is False when the run crashed or was interrupted: nobody waits for a last scrape)."""

    async def start(self, target: Target) -> None: ...

    async def close(self, finished: bool) -> None: ...


class CellCheck(Protocol):
    """A judgement of each measured cell that may fail it and stop the run (e.g. a sweep's check that the
    server still runs the configuration under test): what it found goes to the builder (`amended`)."""

    async def check(self, session: aiohttp.ClientSession, result: CellResult,
                    control: RunControl) -> CellFindings: ...


class Preflight(Protocol):
    """A check before discovery and any load (a telemetry source answering, the server ready): raises
    UsageError to end the run with exit 2, or waits."""

    async def check(self, session: aiohttp.ClientSession, url: str) -> None: ...


class CellPlan(Protocol):
    """Which cells the run measures, one at a time: `cells` yields the next cell to measure, after the
    runner has added the result of the one before to `results` (a search decides from it)."""

    def cells(self, results: ResultsFile) -> Iterator[CellKey]: ...


class MatrixPlan:
    """The matrix of the run's configuration, less the cells already in the results (kept on resume)."""

    def __init__(self, matrix: list[CellKey]):
        self.matrix = matrix

    def cells(self, results: ResultsFile) -> Iterator[CellKey]:
        done = {c.key for c in results.cells}
        yield from (c for c in self.matrix if c not in done)


TelemetryPlan = Callable[[Target], list[SourceFactory]]  # the sources each cell samples, once the target is known
Table = Callable[[list[CellResult]], str | None]  # a table printed after the run (None: nothing to show)


@dataclass
class RunParts:
    driver: Driver
    transport: Transport
    server_down: ServerDownPolicy
    control: RunControl
    sinks: list[Sink] = field(default_factory=list)
    telemetry: TelemetryPlan = lambda target: []
    services: list[Service] = field(default_factory=list)
    interrupts: Interrupts | None = None
    checks: list[CellCheck] = field(default_factory=list)
    preflight: list[Preflight] = field(default_factory=list)
    banner: str | None = None  # said once before the run: what kind of load it is
    tables: list[Table] = field(default_factory=list)  # printed after the run: the console's, chosen by the CLI
    verifier: Verifier | None = None  # --verify: verification requests in every cell
    plan: CellPlan | None = None  # which cells, in which order (default: the configuration's matrix)
    drift: ControlCheck | None = None  # the first cell measured again at the end (--drift-check)


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Runner:
    def __init__(self, cfg: RunConfig, url: str, parts: RunParts, results: ResultsFile, run_id: str,
                 headers: dict):
        self.cfg = cfg
        self.url = url
        self.parts = parts
        self.results = results
        self.run_id = run_id
        self.headers = headers
        self.anchor = RunAnchor.now()
        self.control = parts.control
        self.target: Target | None = None
        self.first: CellResult | None = None  # the first cell this run measured: the drift check's control
        self.drift: Drift | None = None

    @property
    def found_target(self) -> Target:
        """The target `setup` found: every part that runs after it reads this."""
        assert self.target is not None, "setup() finds the target before any cell"
        return self.target

    @property
    def cells(self) -> list[CellResult]:
        return self.results.cells

    def cells_to_run(self) -> Iterator[CellKey]:
        """The cells to measure, one at a time (`RunParts.plan`; by default the matrix less the cells already
        in the results, kept from an earlier, resumed run)."""
        return (self.parts.plan or MatrixPlan(self.cfg.cells())).cells(self.results)

    async def run(self) -> int:
        if self.parts.banner:
            log(self.parts.banner)
        if self.parts.interrupts is None:
            return await self._run()
        return await self.parts.interrupts.guard(self._run)

    async def _run(self) -> int:
        cfg = self.cfg
        ccfg = ClientConfig(base_url=self.url, api=cfg.api, timeout_s=cfg.timeout_s,
                            idle_timeout_s=cfg.idle_timeout_s, headers=self.headers, tls=cfg.tls)
        async with make_session(ccfg) as session:
            measurer = await self.setup(session)
            started: list[Service] = []
            finished = False
            try:
                for svc in self.parts.services:
                    await svc.start(self.found_target)
                    started.append(svc)
                await self.measure_matrix(session, measurer)
                await self.check_drift(session, measurer)
                for s in self.parts.sinks:
                    s.close()
                finished = self.control.interrupted_by is None
            finally:
                for svc in reversed(started):
                    await svc.close(finished)
                await self.parts.transport.close()
        cells = list(self.cells)
        for text in (t(cells) for t in self.parts.tables):
            if text:
                print(text)
        print(f"results: {self.results.path}", file=sys.stderr)
        return self.exit_code()

    async def setup(self, session: aiohttp.ClientSession) -> CellMeasurer:
        cfg = self.cfg
        for pre in self.parts.preflight:
            await pre.check(session, self.url)
        t = self.target = await find_target(session, cfg, self.url)
        prompts = await size_prompts(session, cfg, t, self.run_id, self.headers)
        self.results.begin(cfg, self.run_id, self.anchor, t.as_dict(),
                           prompts.describe())
        spec = t.spec_settings()
        log(f"target {t.url}  engine={t.engine}  model={t.model}  api={t.api}  fingerprint={t.fingerprint()}")
        if spec:
            log("speculative: " + "  ".join(f"{k.replace('speculative_', '')}={v}" for k, v in spec.items()))
        log(sizing_note(prompts.describe()))  # the run id heads the matrix's first line, next
        p = self.parts
        if p.verifier is not None:
            await p.verifier.prepare(session, prompts.model)
            self.results.sections["verify"] = p.verifier.summary()
        return CellMeasurer(cfg, self.run_id, prompts, p.driver, p.transport, p.sinks, p.telemetry(t),
                            self.control, Progress(), p.verifier)

    async def measure_matrix(self, session: aiohttp.ClientSession, measurer: CellMeasurer) -> None:
        known = None if self.parts.plan else len(list(self.cells_to_run()))  # a search decides as it goes
        for s in self.parts.sinks:
            s.run_started(self.run_id, known)
        for cell in self.cells_to_run():
            if self.control.stopping:
                kind = IncidentKind.NOT_REACHED if self.control.interrupted_by is None else IncidentKind.INTERRUPTED_BEFORE
                self.results.add(unmeasured(cell, kind, self.control.stop_reason, self.run_id))
                continue
            result = await self.measure_repeats(session, measurer, cell)
            self.first = self.first or result
            self.results.add(result)
            self.tell_finished(cell, result)
            self.results.save()
        self.results.save()  # with the cells that were not measured (marked skipped), the plan's last word

    async def check_drift(self, session: aiohttp.ClientSession, measurer: CellMeasurer) -> None:
        """The first cell measured again and judged (`RunParts.drift`, run/drift_check.py); the verdict goes
        into the results' `drift` part (and a drift into the first cell's note)."""
        check = self.parts.drift
        if check is None or self.first is None or self.control.stopping:
            return
        async def again(cell: CellKey, tag: str) -> CellResult:
            return await measure_again(self, session, measurer, cell, tag)

        measured = sum(1 for c in self.cells if c.run_id == self.run_id)
        planned = self.parts.driver.planned_requests(self.first.key)
        self.drift = await check.run(self.first, measured, planned, again, self.control)
        if self.drift is None:
            return
        if self.drift.drifted:  # the control's check fails: a new first cell in the results
            first, self.first = self.first, amended(self.first, incident(IncidentKind.DRIFTED, self.drift.sentence))
            self.results.replace(first, self.first)
        self.results.sections["drift"] = self.drift.to_json()
        self.results.save()

    def tell_finished(self, cell: CellKey, result: CellResult) -> None:
        """A finished cell to every sink (the console says its line, the exporter sets its gauges)."""
        for s in self.parts.sinks:
            s.cell_finished(cell, result)

    async def measure_repeats(self, session: aiohttp.ClientSession, measurer: CellMeasurer,
                              cell: CellKey) -> CellResult:
        """The cell measured `--repeat` times (each a whole measurement, told to the sinks when there are
        several), combined (`combine_repeats`); an interrupt between repeats ends them, and the cell is measured
        again on resume."""
        n = self.cfg.repeat
        results: list[CellResult] = []
        for repeat in range(n):
            if results and self.control.stopping:
                why = f"stopped early: {len(results)} of {n} repeats measured"
                results[-1] = amended(results[-1], incident(IncidentKind.INTERRUPTED, why))
                break
            results.append(await self.measure_cell(session, measurer, cell, repeat))
            if n > 1:
                for s in self.parts.sinks:
                    s.repeat_finished(cell, results[-1], repeat + 1)
        return combine_repeats(results)

    async def measure_cell(self, session: aiohttp.ClientSession, measurer: CellMeasurer,
                           cell: CellKey, repeat: int = 0) -> CellResult:
        async def attempt(c: CellKey, n: int, stop: StopToken) -> tuple[CellResult, LoadOutcome]:
            return await measurer.measure(session, c, n, stop, repeat)

        try:
            result = await self.parts.server_down.run_cell(session, cell, attempt,
                                                          self.parts.driver.planned_requests(cell),
                                                          self.found_target, self.headers)
        except (TimeoutError, ServerError, aiohttp.ClientError) as exc:
            # sizing the cell's prompts failed before any load: this cell fails, the run goes on
            result = unmeasured(cell, IncidentKind.BEFORE_LOAD, f"before load: {exc}"[:300])
        # the run's id, or a cell measured again's own (`remeasure.py`)
        result = amended(result, CellFindings(run_id=measurer.run_id,
                                              load={"wall_clock": wall_clock(result.load.window_ns, self.anchor)}))
        for check in self.parts.checks:
            result = amended(result, await check.check(session, result, self.control))
        return result

    def exit_code(self) -> int:
        """0 when every cell is ok (a shard's cell without a slot counts: the other shards sent it) and the
        server did not drift, else 1."""
        done = all(c.status is CellStatus.OK or c.load.shard_has_no_slot for c in self.cells)
        return 0 if done and not (self.drift and self.drift.drifted) else 1
