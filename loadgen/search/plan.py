"""`loadgen search`'s cells: the walk's cells (`walk.walk`), one prompt length after another,
each measured as a normal cell; a cell already in the results (a resumed search) is not measured again.

The plan is also the search's other parts: the size of each cell (`requests`, read by `SizedCells`, the
driver wrapper below), the judgement of each cell it measured (`check`, a `CellCheck`: the note of a cell
measured again and the drift verdict of the control probe) and its state for the live watchers (`watch`).
Before each cell the early stop (`run.early_stop`) is told the nearest lower probe, its reference."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import aiohttp

from loadgen.config import SloConfig
from loadgen.console import log
from loadgen.metrics.drift import judge_drift
from loadgen.metrics.oversaturation import Reference
from loadgen.metrics.record_table import RecordTable
from loadgen.names import CellStatus, SearchOver
from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.findings import NOTHING, CellFindings, incident
from loadgen.results.incidents import IncidentKind
from loadgen.results.slo_part import attainment_text
from loadgen.run.control import RunControl
from loadgen.run.drivers import Driver
from loadgen.run.early_stop import OversaturationStop
from loadgen.schedule.cell_run import CellRun
from loadgen.search.probes import Measure, Role, SearchConfig
from loadgen.search.result import search_section
from loadgen.search.state import SearchWatcher, state_of
from loadgen.search.walk import replay, walk

WIDTH = 120


def load_of(over: SearchOver, key: CellKey) -> float:
    return key.concurrency if over == SearchOver.CONCURRENCY else key.request_rate or 0.0


def reference(over: SearchOver, key: CellKey, cells: list[CellResult]) -> Reference | None:
    """The usable probe of the same prompt length nearest below `key`'s load, as the early stop's reference."""
    below = [(c, tok_s, ttft_s) for c in cells
             if c.key.context_tokens == key.context_tokens and c.status == CellStatus.OK
             and load_of(over, c.key) < load_of(over, key) and (tok_s := c.throughput.output_tok_s)
             and (ttft_s := (c.latency.ttft_s or {}).get("p50"))]
    if not below:
        return None
    c, tok_s, ttft_s = max(below, key=lambda b: (load_of(over, b[0].key), -b[0].key.again))
    return Reference(c.key.label(), load_of(over, c.key), tok_s, ttft_s)


def said(text: str) -> str:
    """A log line of the search within WIDTH columns."""
    return text if len(text) <= WIDTH else text[: WIDTH - 2] + " …"


class SearchPlan:
    def __init__(self, cfg: SearchConfig, slo: SloConfig, contexts: list[int], cap: int = 0,
                 early: OversaturationStop | None = None):
        self.cfg, self.slo, self.contexts, self.cap, self.early = cfg, slo, contexts, cap, early
        self.asked: dict[CellKey, Measure] = {}
        self.watchers: list[SearchWatcher] = []
        self.results: ResultsFile | None = None

    def watch(self, watcher: SearchWatcher) -> None:
        self.watchers.append(watcher)

    def requests(self, cell: CellKey) -> int:
        """The measured requests the walk asked of `cell` (0: none asked; the driver's own count stands)."""
        m = self.asked.get(cell)
        return m.requests if m is not None else 0

    def cells(self, results: ResultsFile) -> Iterator[CellKey]:
        def cell_of(key: CellKey) -> CellResult | None:
            found = [c for c in results.cells if c.key == key]
            return found[-1] if found else None

        self.results = results
        for ctx in self.contexts:
            for m in walk(self.cfg, ctx, cell_of, self.cap):
                self.asked[m.key] = m
                if m.why:
                    log(said(f"search: {m.key.label()}: {m.why}"))
                if self.early is not None:
                    self.early.compare_with(reference(self.cfg.over, m.key, results.cells),
                                            load_of(self.cfg.over, m.key))
                self._publish(results, ctx, load_of(self.cfg.over, m.key))
                yield m.key
                measured = cell_of(m.key)
                log(f"search: {m.key.label()} {attainment_text(measured.slo if measured else None) or 'not usable'}")
                self._write(results)
            self._publish(results, ctx, None)
        self._write(results)

    def _publish(self, results: ResultsFile, ctx: int, probe: float | None) -> None:
        if not self.watchers:
            return
        by_key = {c.key: c for c in results.cells}
        state = state_of(replay(self.cfg, ctx, by_key, self.cap), ctx, self.cfg.over, probe)
        for w in self.watchers:
            w.search_state(state)

    def _write(self, results: ResultsFile) -> None:
        """The answer so far, as the results document's `search` part (saved with the next cell)."""
        results.sections["search"] = search_section(self.cfg, self.slo, self.contexts, results.cells, self.cap)

    async def check(self, session: aiohttp.ClientSession, result: CellResult, control: RunControl) -> CellFindings:
        """A cell the walk measured again gets its note; the control probe measured again, the drift verdict
        (a failed check when it confirms a drift: the search ends without an answer and exits 1)."""
        m = self.asked.get(result.key)
        if m is None or m.role is Role.PROBE:
            return NOTHING
        found = incident(IncidentKind.MEASURED_AGAIN, m.why)
        if m.role is Role.CONTROL and m.control is not None:
            found += self._judge_control(m, result)
        return found

    def _judge_control(self, m: Measure, result: CellResult) -> CellFindings:
        first = next((c for c in self.results.cells if c.key == m.control), None) if self.results else None
        if first is None:
            return NOTHING
        drift = judge_drift(first, result)
        if not drift.drifted:
            return NOTHING
        log(said(f"search: {drift.sentence}" + ("" if m.confirms else "; measuring it once more to confirm")))
        return incident(IncidentKind.DRIFTED, drift.sentence) if m.confirms else NOTHING


class SizedCells:
    """The run's driver, with each search cell's measured requests raised to what the walk asked
    (`SearchPlan.requests`); every other call forwarded as it is."""

    def __init__(self, inner: Driver, requests: Callable[[CellKey], int]):
        self.inner, self.requests = inner, requests

    def planned_requests(self, cell: CellKey) -> int:
        return max(self.requests(cell), self.inner.planned_requests(cell))

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.warm_up(run, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.drive(run, cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        return self.inner.finish(cell, measured)
