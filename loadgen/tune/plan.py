"""One visit of one configuration: which parts it measures, one at a time, and why (`decide.after_part`).

A visit is a `CellPlan` of the normal runner, given to the sweep's `run_config` through the run it builds, so
the restart, the readiness gate, the records, the results file and the diagnostics are the sweep's own. It asks
for each wanted load in matrix order:

- `first` (the visit of every configuration): a first part, then more parts at the same load while the part
  leaves it close to the best other configuration there (`after_part`), up to requests_per_cell;
- `again` (a contender of a tie still open at the end): one part, then more on the same rule, up to as many again;
- `control` (the first configuration visited, at the end, at every load): one part as large as its first, judged
  against it (`metrics.drift.judge_drift`, kept in the `tune` section as `control`): a pair of parts across the
  whole tune, which the verdict pools into the noise between runs as it pools every load measured twice (its own
  `drift` part is left out: the same pair would count twice).

Every decision is a function of the stored cells, so a visit cut short by Ctrl-C resumes where it stopped: a
part already finished is not measured again. The parts, their roles and the decisions are the results' `tune`
section.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp

from loadgen.console import log
from loadgen.metrics.drift import judge_drift
from loadgen.names import CellStatus
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.findings import NOTHING, CellFindings, incident
from loadgen.results.incidents import IncidentKind
from loadgen.results.objectives import ObjectiveSpec
from loadgen.results.verdict import BetweenRuns, Estimate, Load, estimate, ineligible_reason
from loadgen.run.control import RunControl
from loadgen.tune.budget import Budget
from loadgen.tune.decide import Call, Step, after_part, parts_most
from loadgen.tune.live import TuneState, TuneWatcher


class Role(StrEnum):
    FIRST = "first"
    AGAIN = "again"
    CONTROL = "control"


@dataclass(frozen=True)
class Want:
    """A load a visit measures: how, the sweep's requests per cell there (`full`) and a part's (`part`)."""

    load: Load
    role: Role
    full: int
    part: int
    contender: bool = False  # a control's load where it is also a contender: measured on as `again`

    def key(self, again: int) -> CellKey:
        return CellKey(self.load.context_tokens, self.load.concurrency, self.load.request_rate, again)


def cells_at(cells: list[CellResult], load: Load) -> list[CellResult]:
    return [c for c in cells if Load.of(c.key) == load]


def next_key(want: Want, cells: list[CellResult]) -> CellKey:
    """The load's next part: `again` one past the highest stored (0 for the first)."""
    here = cells_at(cells, want.load)
    return want.key(max((c.key.again for c in here), default=-1) + 1)


def measured_requests(cell: CellResult) -> int:
    """Every measured request of the cell, whatever its outcome."""
    n = cell.requests.requests or {}
    return n.get("ok", 0) + n.get("failed", 0) + n.get("cancelled", 0) + n.get("abandoned", 0)


class VisitPlan:
    """The cells of one visit (module docstring), sized by `requests` (`run.part_sizes`), noted by `check`."""

    def __init__(self, name: str, wants: list[Want], rivals: dict[Load, Estimate | None], spec: ObjectiveSpec,
                 resolution: float, between: BetweenRuns, budget: Budget, section: dict[str, Any] | None = None,
                 say: Callable[[str], None] = log, standing: Callable[[], TuneState] | None = None):
        self.name, self.wants, self.rivals, self.spec = name, wants, rivals, spec
        self.resolution, self.between, self.budget, self.say = resolution, between, budget, say
        self.standing = standing  # the tune's state as the folder tells it (tune.json written anew)
        self.watchers: list[TuneWatcher] = []
        stored = section or {}
        self.parts: list[dict[str, Any]] = list(stored.get("parts") or [])
        self.stops: list[dict[str, Any]] = list(stored.get("stops") or [])
        self.control: list[dict[str, Any]] = list(stored.get("control") or [])  # each load's drift judgement
        self.sizes: dict[CellKey, int] = {}
        self.whys: dict[CellKey, str] = {}
        self.ended: str | None = None  # why the visit stopped before its plan's end (the budget, a failed part)

    def watch(self, watcher: TuneWatcher) -> None:
        """`watcher` is told the tune's state as the visit starts and after each part (the live exporter)."""
        self.watchers.append(watcher)

    def _tell(self) -> None:
        if self.standing is None or not self.watchers:
            return
        now = self.standing()
        for w in self.watchers:
            w.tune_state(now)

    def requests(self, key: CellKey) -> int:
        return self.sizes.get(key, 0)

    def order(self, stored: list[CellResult]) -> list[CellKey]:
        """The parts this visit will measure as far as the stored cells tell (a load's next part where one is
        due): the sweep's `order`, so that a visit with something to do is never skipped as done."""
        finished = [c for c in stored if c.finished]
        out = []
        for want in self.wants:
            here = cells_at(finished, want.load)
            if want.role is Role.FIRST and here and self._call(here, want, 0).step is Step.STOP:
                out.append(min(c.key for c in here))
            elif not (want.role is Role.CONTROL and self._control_done(finished, want.load)):
                out.append(next_key(want, finished))
        return out

    def cells(self, results: ResultsFile) -> Iterator[CellKey]:
        self._write(results)
        self._tell()
        for want in self.wants:
            yield from self._at(results, want)
            if self.ended:
                self.say(f"[{self.name}] {self.ended}")
                break
        self._write(results)

    def _at(self, results: ResultsFile, want: Want) -> Iterator[CellKey]:
        fresh = 0
        while True:
            here = [c for c in cells_at(results.cells, want.load) if c.finished]
            drift = want.role is Role.CONTROL and not self._control_done(results.cells, want.load)
            if want.role is Role.FIRST and not here:
                why = "first part"
            elif want.role is Role.AGAIN and not fresh:
                why = "a contender of an open tie, measured again"
            elif drift:
                why = "the control measured again: the drift between runs"
            else:
                call = self._call(here, want, fresh)
                if call.step is Step.STOP:
                    self.stops.append({**want.key(0).as_dict(), "role": want.role.value, "why": call.why})
                    self.say(f"[{self.name}] {want.load.text()}: {call.why}")
                    return
                why = call.why
            result = yield from self._part(results, want, why)
            if result is None:
                return
            if drift:
                self._judge_drift(results, want, result)
            fresh += 1

    def _part(self, results: ResultsFile, want: Want, why: str) -> Generator[CellKey, None, CellResult | None]:
        """Measure one part (the generator's value: its result; None when the visit must end here)."""
        self.ended = self.budget.why_not()
        if self.ended:
            return None
        key = next_key(want, results.cells)
        self.sizes[key], self.whys[key] = want.part, why
        self._write(results)
        yield key
        result = next((c for c in reversed(results.cells) if c.key == key), None)
        if result is None or result.status is not CellStatus.OK:
            self.ended = f"{want.load.text()}: {result.error if result is not None else 'not measured'}"
            return None
        self.budget.cells += 1
        self.parts.append({**key.as_dict(), "role": want.role.value, "requests": measured_requests(result),
                           "why": why})
        self._write(results)
        self._tell()
        return result

    def _call(self, here: list[CellResult], want: Want, fresh: int) -> Call:
        """The decision after the parts `here` (finished, at the want's load), `fresh` of them this visit's."""
        ok = [c for c in here if ineligible_reason(c) is None]
        # a first visit's room counts every part; the control's part leaves no room for more unless it contends here
        done = len(here) if want.role is Role.FIRST else \
            parts_most(want.full, want.part) if want.role is Role.CONTROL and not want.contender else fresh
        mine = estimate(self.name, ok, self.spec, self.between)
        # the end's contenders are all measured again in the same round: each projected as the rival will be
        return after_part(mine, self.rivals.get(want.load), self.spec.higher_is_better, self.resolution, len(ok),
                          parts_most(want.full, want.part) - done, self.part_se(ok),
                          both=want.role is not Role.FIRST)

    def part_se(self, ok: list[CellResult]) -> float:
        """The log-sd of one part here: its own (the first part's interval) with the noise between parts added."""
        first = estimate(self.name, ok[:1], self.spec) if ok else None
        own = (first.log_se() or 0.0) if first is not None else 0.0
        return math.hypot(own, self.between.effective_se)

    def _control_done(self, cells: list[CellResult], load: Load) -> bool:
        keys = {c.key for c in cells if c.finished and Load.of(c.key) == load}
        return any(p.get("role") == Role.CONTROL.value and CellKey(
            p["context_tokens"], p["concurrency"], p.get("request_rate"), p.get("again", 0)) in keys
            for p in self.parts)

    def _judge_drift(self, results: ResultsFile, want: Want, again: CellResult) -> None:
        first = next((c for c in results.cells if c.key == want.key(0) and c.finished), None)
        if first is None:
            return
        drift = judge_drift(first, again)
        self.say(f"[{self.name}] control: {drift.sentence}")
        self.control.append(drift.to_json())
        self._write(results)

    def _write(self, results: ResultsFile) -> None:
        results.sections["tune"] = {"parts": self.parts, "stops": self.stops, "control": self.control}

    async def check(self, session: aiohttp.ClientSession, result: CellResult, control: RunControl) -> CellFindings:
        """A part after a load's first gets its note: why it was measured."""
        why = self.whys.get(result.key)
        return incident(IncidentKind.MEASURED_AGAIN, why) if why and result.key.again else NOTHING
