"""`loadgen search`'s walk, pure: which cell to measure next, and the answer the cells give.

The bracket is read from the probes' verdicts each time (the latest measurement of each load counts; a probe
not decided yet counts by its point estimate): missed = the lowest load that missed, met = the highest load
below it that met. The load grows from `start` until a probe misses (a first probe that misses halves it), then
the bracket is bisected until it is narrow enough (`SearchConfig.grow`, `lower`, `middle`, `width_ok`). Only
the probes the next step rests on (the bracket's two ends, or the one end an answer stands on) are made sure of:
- an end that contradicts another probe (`probes.contradiction`: it missed below a load that met, or its
  throughput fell by half while the load grew) is measured once more; the new measurement counts, both are
  kept, and the report names those that disagree. A probe past the bracket's missed end, or below its met end,
  decides nothing and is not measured again;
- an end whose attainment is not decided is extended (`probes.next_part`); a probe the growth left behind is not;
- before answering, the bracket's missed end is measured again (unless it was already): when it now meets,
  the bracket moves and the walk goes on;
- the control probe is measured again at the end (and every `drift_every` probes when that is set). Its
  reference is the first measurement of the first load (its first part of ≥ 1 s: the server's state when the
  search began); a later measurement of that load replaces it only when it is faster by the drift factor (a
  stall slows a measurement, it never speeds one up: the first one stalled). When the control moved beyond
  noise (`metrics.drift.judge_drift`), and once more measured it moved again (a stall inside the check is not
  a drift), the walk ends with no answer.
Every cell is a normal cell of the results file keyed by its load and its measurement of that load
(`CellKey.again`), so the same walk replayed over a file (`replay`) gives the same answer: a search resumes
like a run. A probe that is not usable (failed, skipped) ends the walk: no answer is claimed past it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from loadgen.metrics.drift import MIN_WINDOW_S, Drift, judge_drift
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import unmeasured
from loadgen.search.probes import (
    TIME_MARGIN,
    Again,
    Measure,
    Probe,
    Role,
    SearchConfig,
    contradiction,
    extend_why,
    first_requests,
    judged_part,
    next_part,
    probe_key,
    requests_for_s,
    resolution_text,
    usable,
)


@dataclass
class Bracket:
    """The walk's end: the highest load that met (`met`), the lowest that missed above it (`missed`), the load
    of every cell it measured (`probes`), why it ended, whether with an answer (`complete`), the loads
    measured again, the control probe's checks and the drift that ended it (if any)."""

    met: float | None = None
    missed: float | None = None
    probes: list[float] = field(default_factory=list)
    ended: str = ""
    complete: bool = False
    again: list[Again] = field(default_factory=list)
    controls: list[Drift] = field(default_factory=list)
    drift: Drift | None = None
    latest: dict[float, Probe] = field(default_factory=dict)
    capped: list[float] = field(default_factory=list)


class Ended(Exception):
    def __init__(self, reason: str, complete: bool = False):
        super().__init__(reason)
        self.reason, self.complete = reason, complete


Walk = Generator[Measure, CellResult | None, Bracket]
Asks = Generator[Measure, CellResult | None, None]  # cells asked of the caller, each answered by the cell measured
Step = tuple[float, Role, str]  # the next cell: its load, why it is measured (its role) and the note it gets


class Walker:
    def __init__(self, cfg: SearchConfig, context: int, cap: int = 0):
        self.cfg, self.context, self.cap = cfg, context, cap
        self.b = Bracket()
        self.history: dict[float, list[Probe]] = {}
        self.control: CellResult | None = None  # the drift check's reference (module docstring)
        self.since_check = 0

    def run(self) -> Walk:
        try:
            while True:
                step = self.next_step()
                if isinstance(step, Ended):
                    if step.complete and self._checks_drift():
                        yield from self.check_control("at the end")
                    raise step
                load, role, why = step
                if role is Role.EXTEND:
                    yield from self.extend(load, why)
                    continue
                yield from self.measure(load, role, why)
                every = self.cfg.drift_every
                if every and self._checks_drift() and self.since_check >= every:
                    n = self.since_check
                    yield from self.check_control(f"after {n} probe" + ("s" if n > 1 else ""))
        except Ended as end:
            self.b.ended, self.b.complete = end.reason, end.complete
        self.b.met, self.b.missed = self.bracket()
        return self.b

    def _checks_drift(self) -> bool:
        """Drift is checked and there is a control, measured since the last check."""
        return self.cfg.drift_check and self.control is not None and self.since_check >= 1

    # ---- the bracket and the next load -------------------------------------------------------------------
    def bracket(self) -> tuple[float | None, float | None]:
        latest = self.b.latest
        missed = min((x for x, p in latest.items() if not p.met), default=None)
        met = max((x for x, p in latest.items() if p.met and (missed is None or x < missed)), default=None)
        return met, missed

    def next_step(self) -> Step | Ended:
        lo, hi = self.bracket()
        outward = self._outward(lo, hi)
        if outward is not None:
            return outward, Role.PROBE, ""
        for x in (lo, hi):
            step = None if x is None else self._settle(x)
            if step is not None:
                return step
        done = self._done(lo, hi)
        if done is None:
            assert lo is not None and hi is not None, "only a bracket of two ends is bisected"
            return self.cfg.middle(lo, hi), Role.PROBE, ""
        if hi is not None and len(self.history[hi]) < 2:
            return hi, Role.RECHECK, f"the missed end {self.cfg.name(hi)}, measured again before answering"
        return done

    def _outward(self, lo: float | None, hi: float | None) -> float | None:
        """Before the bracket has two ends, the next load: up while none missed, down while none met; None at
        the limit, at the lowest load and once there are two ends."""
        if hi is None:
            if lo is None:
                return self.cfg.start
            return self.cfg.grow(lo) if lo < self.cfg.limit else None
        return self.cfg.lower(hi) if lo is None else None

    def _done(self, lo: float | None, hi: float | None) -> Ended | None:
        """The walk's end once its ends are settled (None: the bracket is still too wide)."""
        cfg = self.cfg
        if hi is None:
            return Ended(f"met the SLO up to the limit ({cfg.limit:g}, --max)", True)
        if lo is None:
            return Ended(f"even the lowest load, {hi:g}, missed the SLO", True)
        if cfg.width_ok(lo, hi):
            return Ended(f"bracket {lo:g}–{hi:g} within the resolution ({resolution_text(cfg)})", True)
        return None

    def _settle(self, x: float) -> Step | None:
        """What the bracket's end `x` still needs before the walk rests on it: measured again when it contradicts
        another probe (once), extended while its attainment is not decided; None when it needs nothing."""
        probe = self.b.latest[x]
        if len(self.history[x]) < 2:
            found = [c for q in self.b.latest.values() if (c := contradiction(self.cfg, probe, q)) is not None]
            why = next((why for load, why in found if load == x), None)
            if why is not None:
                return x, Role.AGAIN, f"measured again: {why}"
        if next_part(self.cfg, probe) is not None:
            return x, Role.EXTEND, extend_why(self.cfg, probe)
        if probe.capped and x not in self.b.capped:
            self.b.capped.append(x)
        return None

    # ---- measuring ---------------------------------------------------------------------------------------
    def _key(self, load: float) -> CellKey:
        again = sum(1 for p in self.b.probes if p == load)
        return probe_key(self.cfg, self.context, load, self.cap, again)

    def _ask(self, load: float, requests: int, role: Role, why: str, control: CellKey | None = None,
             confirms: bool = False) -> Generator[Measure, CellResult | None, CellResult | None]:
        if len(self.b.probes) >= self.cfg.max_cells:
            lo, hi = self.bracket()
            where = f" (bracket {lo:g}–{hi:g})" if lo is not None and hi is not None else " before a bracket was found"
            raise Ended(f"stopped at --max-cells {self.cfg.max_cells}{where}")
        cell = yield Measure(self._key(load), requests, role, why, control, confirms)
        if cell is not None:
            self.b.probes.append(load)
        return cell

    def _part(self, probe: Probe, requests: int, role: Role, why: str) -> Asks:
        """One more cell of `probe`."""
        cell = yield from self._ask(probe.load, requests, role, why)
        if cell is None or not usable(cell):
            raise Ended(f"the probe at {probe.load:g} could not be used")
        probe.parts.append(cell)

    def _below(self, load: float) -> Probe | None:
        lower = [x for x in self.b.latest if x < load]
        return self.b.latest[max(lower)] if lower else None

    def measure(self, load: float, role: Role, why: str) -> Generator[Measure, CellResult | None, Probe]:
        """A new measurement of `load`, its first part (the first probe: until it holds a part long enough for
        the drift check, if it needs more); it becomes the load's latest measurement."""
        probe = Probe(load, role)
        yield from self._part(probe, first_requests(self.cfg, load, self._below(load)), role, why)
        while self.control is None and self.cfg.drift_check and judged_part(probe) is None and len(probe.parts) < 3:
            more = next_part(self.cfg, probe)
            note = extend_why(self.cfg, probe) if more else f"extended: the control needs a part of {MIN_WINDOW_S:g} s"
            yield from self._part(probe, max(more or 0, requests_for_s(probe, TIME_MARGIN * MIN_WINDOW_S)),
                                  Role.EXTEND, note)
        self._measured(probe, why)
        return probe

    def extend(self, load: float, why: str) -> Asks:
        """One more part of the load's latest measurement, whose attainment is not decided yet."""
        probe = self.b.latest[load]
        n = next_part(self.cfg, probe)
        assert n is not None, "only a probe that is not decided is extended"
        yield from self._part(probe, n, Role.EXTEND, why)

    def _measured(self, probe: Probe, why: str) -> None:
        """The probe is the latest measurement of its load (a load measured before: both kept, in `again`)."""
        load = probe.load
        if self.history.get(load):
            self.b.again.append(Again(load, self.history[load][-1], probe, why))
        self.history.setdefault(load, []).append(probe)
        self.b.latest[load] = probe
        self.since_check += 1
        part = judged_part(probe) or probe.parts[0]
        if self.control is None:
            self.control, self.since_check = part, 0
        elif self.cfg.load_of(self.control.key) == load:
            moved = judge_drift(self.control, part)
            if moved.drifted and moved.factor < 1:  # the reference was the slower one: a stall, not the server
                self.control = part

    def check_control(self, when: str) -> Asks:
        """The control probe measured again (as many requests as its reference); one that moved beyond noise is
        measured once more, and only a drift both show ends the walk (a stall of the server inside the check is
        not a drift)."""
        self.since_check = 0
        drift = yield from self._control_again(f"control probe measured again {when}", False)
        if drift.drifted:
            drift = yield from self._control_again(f"control probe measured again to confirm: {drift.sentence}", True)
        if drift.drifted:
            self.b.drift = drift
            raise Ended(f"no answer: {drift.sentence}")

    def _control_again(self, why: str, confirms: bool) -> Generator[Measure, CellResult | None, Drift]:
        first = self.control
        assert first is not None, "a control is measured again only once there is one"
        load = self.cfg.load_of(first.key)
        requests = max(self.cfg.min_requests, int(first.slo.scheduled or 0) if first.slo else 0)
        cell = yield from self._ask(load, requests, Role.CONTROL, why, first.key, confirms)
        if cell is None or unmeasured(cell) is not None:
            raise Ended(f"the control probe at {load:g} could not be measured again")
        drift = judge_drift(first, cell)
        self.b.controls.append(drift)
        return drift


def walk(cfg: SearchConfig, context: int, cell_of: Callable[[CellKey], CellResult | None], cap: int = 0
         ) -> Generator[Measure, None, Bracket]:
    """Drives the walk with the cells `cell_of` gives; yields each cell it has none for yet (the caller
    measures it, then `cell_of` must give it)."""
    g = Walker(cfg, context, cap).run()
    m = next(g)
    while True:
        if cell_of(m.key) is None:
            yield m
        try:
            m = g.send(cell_of(m.key))
        except StopIteration as end:
            bracket: Bracket = end.value
            return bracket


def replay(cfg: SearchConfig, context: int, cells: dict[CellKey, CellResult], cap: int = 0) -> Bracket:
    """The answer the stored cells give; a cell not stored (yet) ends the walk as one that cannot be used."""
    g = Walker(cfg, context, cap).run()
    m = next(g)
    while True:
        try:
            m = g.send(cells.get(m.key))
        except StopIteration as end:
            bracket: Bracket = end.value
            return bracket
