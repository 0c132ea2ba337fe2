"""`loadgen search`'s walk, pure: which cell to measure next, and the answer the cells give.

The bracket is read from the probes' verdicts each time (the latest measurement of each load counts):
missed = the lowest load that missed, met = the highest load below it that met. Until a probe misses, the
load grows from `start` × `growth` a probe (up to `limit`); when the first probe already misses it halves
down to the smallest load; then the bracket is bisected (geometrically while it spans ×2 or more) until
`SearchConfig.width_ok`. Around that:
- a probe is measured until its attainment is decided (`search.next_part`: extensions);
- a probe that contradicts another (`search.contradiction`) has the suspect load measured once more; the
  new measurement counts, both are kept, and the report names those that disagree;
- before answering, the bracket's missed end is measured again (unless it was already): when it now meets,
  the bracket moves and the walk goes on;
- the control probe (the first probe as last measured, its first part of ≥ 1 s) is measured again every
  `drift_every` probes and at the end; when it moved beyond noise (`metrics.drift.judge_drift`), and once more
  measured it moved again (a stall inside the check is not a drift), the walk ends with no answer.
Every cell is a normal cell of the results file keyed by its load and its measurement of that load
(`CellKey.again`), so the same walk replayed over a file (`replay`) gives the same answer: a search resumes
like a run. A probe that is not usable (failed, skipped) ends the walk: no answer is claimed past it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from loadgen.metrics.drift import MIN_WINDOW_S, Drift, judge_drift
from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import unmeasured
from loadgen.results.search import (
    Measure,
    Probe,
    Role,
    SearchConfig,
    contradiction,
    disagree,
    first_requests,
    next_part,
    probe_key,
    resolution_text,
    usable,
)

LOWEST_RATE_STEPS = 4  # a first rate probe that misses is halved at most this often


@dataclass
class Again:
    """A load measured twice: its two measurements, why, and whether they disagree."""

    load: float
    first: Probe
    second: Probe
    why: str

    @property
    def disagreed(self) -> bool:
        return disagree(self.first, self.second)


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


class Walker:
    def __init__(self, cfg: SearchConfig, context: int, cap: int = 0):
        self.cfg, self.context, self.cap = cfg, context, cap
        self.b = Bracket()
        self.history: dict[float, list[Probe]] = {}
        self.control: CellResult | None = None
        self.since_check = 0

    def run(self) -> Walk:
        try:
            while True:
                step = self.next_step()
                if isinstance(step, Ended):
                    if step.complete and self._control_due(1):
                        yield from self.check_control("at the end")
                    raise step
                load, role, why = step
                probe = yield from self.measure(load, role, why)
                yield from self.resolve(probe)
                if self._control_due(self.cfg.drift_every):
                    n = self.since_check
                    yield from self.check_control(f"after {n} probe" + ("s" if n > 1 else ""))
        except Ended as end:
            self.b.ended, self.b.complete = end.reason, end.complete
        self.b.met, self.b.missed = self.bracket()
        return self.b

    def _control_due(self, probes: int) -> bool:
        """Drift is checked, there is a control, and `probes` probes (≥ 1) were measured since its last check."""
        return bool(self.cfg.drift_every) and self.control is not None and self.since_check >= max(1, probes)

    # ---- the bracket and the next load -------------------------------------------------------------------
    def bracket(self) -> tuple[float | None, float | None]:
        latest = self.b.latest
        missed = min((x for x, p in latest.items() if not p.met), default=None)
        met = max((x for x, p in latest.items() if p.met and (missed is None or x < missed)), default=None)
        return met, missed

    def next_step(self) -> tuple[float, Role, str] | Ended:
        lo, hi = self.bracket()
        cfg = self.cfg
        if hi is None:
            if lo is None:
                return cfg.start, Role.PROBE, ""
            if lo >= cfg.limit:
                return Ended(f"met the SLO up to the limit ({cfg.limit:g}, --max)", True)
            return self._grow(lo), Role.PROBE, ""
        if lo is None:
            lower = self._down(hi)
            if lower is not None:
                return lower, Role.PROBE, ""
            done = Ended(f"even the lowest load, {hi:g}, missed the SLO", True)
        elif cfg.width_ok(lo, hi):
            done = Ended(f"bracket {lo:g}–{hi:g} within the resolution ({resolution_text(cfg)})", True)
        else:
            return self._middle(lo, hi), Role.PROBE, ""
        if len(self.history[hi]) < 2:
            return hi, Role.RECHECK, f"the missed end {self._name(hi)}, measured again before answering"
        return done

    def _grow(self, x: float) -> float:
        up = x * self.cfg.growth
        if self.cfg.over == SearchOver.CONCURRENCY:
            return min(self.cfg.limit, max(int(x) + 1, int(up)))
        return min(self.cfg.limit, float(f"{up:.4g}"))

    def _down(self, x: float) -> float | None:
        """The next load below a first probe that missed (None: none left to try)."""
        if self.cfg.over == SearchOver.CONCURRENCY:
            return None if x <= 1 else max(1, int(x) // 2)
        return x / 2 if x > self.cfg.start / 2 ** LOWEST_RATE_STEPS else None

    def _middle(self, lo: float, hi: float) -> float:
        """The geometric middle of a bracket of ×2 or wider (the first one spans a growth step), else the middle."""
        mid = (lo * hi) ** 0.5 if hi >= 2 * lo else (lo + hi) / 2
        if self.cfg.over == SearchOver.CONCURRENCY:
            return min(max(int(lo) + 1, round(mid)), int(hi) - 1)
        return float(f"{mid:.4g}")

    def _name(self, x: float) -> str:
        return f"c={x:g}" if self.cfg.over == SearchOver.CONCURRENCY else f"rate={x:g}/s"

    # ---- measuring ---------------------------------------------------------------------------------------
    def _key(self, load: float) -> CellKey:
        again = sum(1 for p in self.b.probes if p == load)
        return probe_key(self.cfg, self.context, load, self.cap, again)

    def _ask(self, load: float, requests: int, role: Role, why: str, control: CellKey | None = None,
             confirms: bool = False):
        if len(self.b.probes) >= self.cfg.max_cells:
            lo, hi = self.bracket()
            where = f" (bracket {lo:g}–{hi:g})" if lo is not None and hi is not None else " before a bracket was found"
            raise Ended(f"stopped at --max-cells {self.cfg.max_cells}{where}")
        cell = yield Measure(self._key(load), requests, role, why, control, confirms)
        if cell is not None:
            self.b.probes.append(load)
        return cell

    def _below(self, load: float) -> Probe | None:
        lower = [x for x in self.b.latest if x < load]
        return self.b.latest[max(lower)] if lower else None

    def measure(self, load: float, role: Role, why: str):
        """Measure `load` until its attainment is decided; it becomes the load's latest measurement."""
        probe = Probe(load, role)
        n: int | None = first_requests(self.cfg, load, self._below(load))
        while n is not None:
            cell = yield from self._ask(load, n, role if not probe.parts else Role.EXTEND,
                                        why if not probe.parts else self._extend_why(probe))
            if not usable(cell):
                raise Ended(f"the probe at {load:g} could not be used")
            probe.parts.append(cell)
            n = next_part(self.cfg, probe)
        self._decided(probe, why)
        return probe

    def _decided(self, probe: Probe, why: str) -> None:
        """The probe is the latest measurement of its load (a load measured before: both kept, in `again`)."""
        load = probe.load
        if probe.capped:
            self.b.capped.append(load)
        if self.history.get(load):
            self.b.again.append(Again(load, self.history[load][-1], probe, why))
        self.history.setdefault(load, []).append(probe)
        self.b.latest[load] = probe
        self.since_check += 1
        if self.control is None or self._load_of(self.control) == load:
            # the first probe, whatever its verdict (drift may start inside the next one), as last measured (a
            # first probe that stalled and was measured again is not the server's state): its first part long
            # enough for the drift check to judge
            judged = [c for c in probe.parts if (c.load.duration_s or 0) >= MIN_WINDOW_S]
            first = self.control is None
            self.control = (judged or probe.parts)[0]
            self.since_check = 0 if first else self.since_check

    def _extend_why(self, probe: Probe) -> str:
        low, high = probe.interval() or (0.0, 0.0)
        cfg = self.cfg
        so_far = f"{probe.good} of {probe.scheduled} good [{low:.0%}–{high:.0%}] in {probe.window_s:.1f} s"
        if probe.scheduled < cfg.min_requests or probe.window_s < cfg.min_s:
            return f"extended: {so_far}, short of the minimum ({cfg.min_requests} requests, {cfg.min_s:g} s)"
        return f"extended: {so_far}, the interval straddles the target {probe.required:.0%}"

    def resolve(self, probe: Probe):
        """Measure again, once, each load that a contradiction with this probe makes suspect."""
        while True:
            found = [c for q in self.b.latest.values() if (c := contradiction(self.cfg, probe, q)) is not None]
            found = [(x, why) for x, why in found if len(self.history[x]) < 2]
            if not found:
                return
            load, why = found[0]
            probe = yield from self.measure(load, Role.AGAIN, f"measured again: {why}")

    def check_control(self, when: str):
        """The control probe measured again (as many requests as its first part); one that moved beyond noise
        is measured once more, and only a drift both show ends the walk (a stall of the server inside the
        check is not a drift)."""
        self.since_check = 0
        drift = yield from self._control_again(f"control probe measured again {when}", False)
        if drift.drifted:
            drift = yield from self._control_again(f"control probe measured again to confirm: {drift.sentence}", True)
        if drift.drifted:
            self.b.drift = drift
            raise Ended(f"no answer: {drift.sentence}")

    def _load_of(self, cell: CellResult) -> float:
        key = cell.key
        return key.concurrency if self.cfg.over == SearchOver.CONCURRENCY else key.request_rate or 0.0

    def _control_again(self, why: str, confirms: bool):
        first = self.control
        assert first is not None, "a control is measured again only once there is one"
        load = self._load_of(first)
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
            return end.value


def replay(cfg: SearchConfig, context: int, cells: dict[CellKey, CellResult], cap: int = 0) -> Bracket:
    """The answer the stored cells give; a cell not stored (yet) ends the walk as one that cannot be used."""
    g = Walker(cfg, context, cap).run()
    m = next(g)
    while True:
        try:
            m = g.send(cells.get(m.key))
        except StopIteration as end:
            return end.value
