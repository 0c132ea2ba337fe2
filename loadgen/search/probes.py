"""`loadgen search`'s settings and its probes, pure: a probe's parts pooled, whether its attainment is decided,
how many requests it measures, and when two probes contradict each other. The walk that chooses the loads
is `search/walk.py`.

A probe is one measurement of a load: its first part and, while its attainment is not decided and the walk rests
on it (`search/walk.py`), extensions (more requests at the same load, each a cell of its own:
`CellKey.again`). Pooled over its parts: good = Σ good, scheduled = Σ scheduled, window = Σ duration_s,
output tok/s = Σ (tok/s × duration) / window. It is decided when it has at least `min_requests` requests and
`min_s` seconds and the Wilson interval of good / scheduled (`metrics.attainment`) lies on one side of the
required attainment; a probe stopped early (over-saturated, its miss certain) is decided; at `max_requests`
(default 4 × its first part) it is decided on the point estimate, with a note. Verdict: met = good / scheduled
≥ the required attainment. A probe whose interval lies wholly below the target needs `min_requests` but not
`min_s`: the seconds guard a verdict of met (a short probe may end before a queue builds, or between two
stalls), while a miss that one state of the server made (a stall) is what the re-check of the bracket's missed
end and a contradiction are for; extending a plain miss for its seconds only costs a cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from loadgen.metrics.attainment import decided, wilson_interval
from loadgen.metrics.drift import MIN_WINDOW_S
from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import problem
from loadgen.results.incidents import IncidentKind
from loadgen.results.slo_part import Slo

MIN_REQUESTS = 40  # all good of 35 is the fewest that decide "met" at 90 % (metrics.attainment); 40 leaves room
MIN_S = 10.0  # a probe shorter than this is one server state (a stall, a cache flush); rate cells' default span
EXTEND_UP_TO = 4  # a probe not decided is extended up to this many times its first part's requests
TIME_MARGIN = 1.2
HALF = 0.5  # throughput that falls by more than half while the load grew contradicts
LOWEST_RATE_STEPS = 4  # a first rate probe that misses is halved at most this often


@dataclass(frozen=True)
class SearchConfig:
    """`loadgen search`: raise the load from `start` (× `growth` a probe) until a cell misses the SLO, then
    bisect the bracket until it is no wider than the resolution (`resolution` × the met end when `relative`).
    Growth 4 reaches a knee at 100 from 1 in 4 probes and leaves a bracket that 4 geometric halvings resolve to
    10 % (`middle`): 9–10 probes, the re-check of the missed end and the control probe at the end make 11–12 cells;
    16 leave room for extensions and a contradiction measured again. The control probe is measured again at the
    end when `drift_check`, and also after every `drift_every` probes (0: only at the end)."""

    over: SearchOver = SearchOver.CONCURRENCY
    start: float = 1
    growth: float = 4
    limit: float = 1024  # the highest load probed
    resolution: float = 0.1
    relative: bool = True
    max_cells: int = 16  # cells per prompt length, at most (extensions, re-measures and control probes count)
    min_requests: int = MIN_REQUESTS
    min_s: float = MIN_S
    max_requests: int = 0  # a probe's requests at most, over its parts (0: EXTEND_UP_TO × its first part)
    drift_check: bool = True  # the control probe measured again at the end, for drift (False: never)
    drift_every: int = 0  # and after every this many probes too (0: only at the end; each check costs a cell)

    def width_ok(self, lo: float, hi: float) -> bool:
        """The bracket [lo, hi] is narrow enough (for concurrency, adjacent integers always are)."""
        if self.over == SearchOver.CONCURRENCY and hi - lo <= 1:
            return True
        return hi - lo <= (self.resolution * lo if self.relative else self.resolution)

    def grow(self, x: float) -> float:
        """The probe after `x` met and none missed: × growth (concurrency: at least one more), at most the limit."""
        up = x * self.growth
        if self.over == SearchOver.CONCURRENCY:
            return min(self.limit, max(int(x) + 1, int(up)))
        return min(self.limit, float(f"{up:.4g}"))

    def lower(self, x: float) -> float | None:
        """The probe below a first probe `x` that missed: halved (None: none left to try)."""
        if self.over == SearchOver.CONCURRENCY:
            return None if x <= 1 else max(1, int(x) // 2)
        return x / 2 if x > self.start / 2 ** LOWEST_RATE_STEPS else None

    def middle(self, lo: float, hi: float) -> float:
        """The probe inside the bracket: its geometric middle. The resolution is relative to the met end, so each
        probe halves the bracket's ratio (a ×4 growth step is within 10 % after 4 probes: 4^(1/16) = 1.09; the
        arithmetic middle takes 5 where the edge lies near the bracket's foot)."""
        mid: float = (lo * hi) ** 0.5
        if self.over == SearchOver.CONCURRENCY:
            return min(max(int(lo) + 1, round(mid)), int(hi) - 1)
        return float(f"{mid:.4g}")

    def name(self, x: float) -> str:
        """'c=8' or 'rate=2.5/s'."""
        return f"c={x:g}" if self.over == SearchOver.CONCURRENCY else f"rate={x:g}/s"

    def load_of(self, key: CellKey) -> float:
        """The load a cell of the search measured."""
        return key.concurrency if self.over == SearchOver.CONCURRENCY else key.request_rate or 0.0


class Role(StrEnum):
    """Why a cell of a search is measured."""

    PROBE = "probe"  # a load's first measurement
    EXTEND = "extend"  # more requests of a probe whose attainment is not decided yet
    AGAIN = "again"  # a probe that contradicted another, measured once more
    RECHECK = "recheck"  # the missed end of the final bracket, measured again before answering
    CONTROL = "control"  # the control probe measured again, for drift


@dataclass(frozen=True)
class Measure:
    """A cell the walk asks for: its key, its measured requests (a floor: the run's default may be more),
    why it is measured and a one-line reason (the cell's note; empty for a first probe); a control probe
    names the cell it is compared with, and whether it confirms a drift the check before it found."""

    key: CellKey
    requests: int
    role: Role
    why: str = ""
    control: CellKey | None = None
    confirms: bool = False  # a control probe measured once more because the one before it moved


def usable(cell: CellResult | None) -> bool:
    """A probe's cell the walk can decide from: measured, ok, with SLO figures."""
    return cell is not None and problem(cell) is None and cell.slo is not None


def _slo(cell: CellResult) -> Slo:
    """A usable part's SLO figures (`usable`: every part of a probe has them)."""
    assert cell.slo is not None, "a probe's part without SLO figures"
    return cell.slo


@dataclass
class Probe:
    """One measurement of a load: its parts (cells), pooled (module docstring)."""

    load: float
    role: Role
    parts: list[CellResult] = field(default_factory=list)
    capped: bool = False  # decided on the point estimate at max_requests

    def _sum(self, name: str) -> int:
        return sum(int(getattr(p.slo, name) or 0) for p in self.parts if p.slo is not None)

    @property
    def good(self) -> int:
        return self._sum("good")

    @property
    def scheduled(self) -> int:
        return self._sum("scheduled")

    @property
    def window_s(self) -> float:
        return sum(p.load.duration_s or 0.0 for p in self.parts)

    @property
    def tok_s(self) -> float:
        w = self.window_s
        return sum((p.throughput.output_tok_s or 0.0) * (p.load.duration_s or 0.0) for p in self.parts) / w if w else 0.0

    @property
    def required(self) -> float:
        return float(_slo(self.parts[0]).attainment_required or 0.0)

    @property
    def attainment(self) -> float:
        return self.good / self.scheduled if self.scheduled else 0.0

    @property
    def met(self) -> bool:
        return self.scheduled > 0 and self.attainment >= self.required

    @property
    def stopped_early(self) -> bool:
        return any(p.has(IncidentKind.OVERSATURATED) for p in self.parts)

    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.good, self.scheduled)


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


def next_part(cfg: SearchConfig, probe: Probe) -> int | None:
    """Requests of the probe's next part, or None when it is decided (module docstring); sets `capped`."""
    if probe.stopped_early:
        return None
    n = probe.scheduled
    verdict = decided(probe.good, n, probe.required)
    short = _short_of_minimums(cfg, probe, timed=verdict is not False)
    if not short and verdict is not None:
        return None
    cap = cfg.max_requests or EXTEND_UP_TO * int(_slo(probe.parts[0]).scheduled or 0)
    if n >= cap:
        probe.capped = decided(probe.good, n, probe.required) is None
        return None
    return max(1, min(short or n, cap - n))  # straddling the target: twice the requests


def _short_of_minimums(cfg: SearchConfig, probe: Probe, timed: bool = True) -> int:
    """Requests still missing to reach `min_requests` and, when `timed`, `min_s` at the probe's request rate so
    far. A probe whose interval lies below the target is not timed (module docstring: why)."""
    n, window = probe.scheduled, probe.window_s
    short_s = cfg.min_s - window if timed else 0.0
    # × TIME_MARGIN: a part's window is a little shorter than its requests' share of the rate (its ramps)
    by_time = math.ceil(TIME_MARGIN * short_s * n / window) if short_s > 0 and window > 0 else 0
    return max(cfg.min_requests - n, by_time, 0)


def extend_why(cfg: SearchConfig, probe: Probe) -> str:
    """Why a probe is extended, with its figures so far (the extension's note)."""
    low, high = probe.interval() or (0.0, 0.0)
    so_far = f"{probe.good} of {probe.scheduled} good [{low:.0%}–{high:.0%}] in {probe.window_s:.1f} s"
    if probe.scheduled < cfg.min_requests or probe.window_s < cfg.min_s:
        return f"extended: {so_far}, short of the minimum ({cfg.min_requests} requests, {cfg.min_s:g} s)"
    return f"extended: {so_far}, the interval straddles the target {probe.required:.0%}"


def judged_part(probe: Probe) -> CellResult | None:
    """The probe's first part long enough for the drift check to judge (None: none is)."""
    return next((c for c in probe.parts if (c.load.duration_s or 0) >= MIN_WINDOW_S), None)


def requests_for_s(probe: Probe, seconds: float) -> int:
    """The requests that fill `seconds` at the probe's request rate so far (at least 1)."""
    window = probe.window_s
    return max(1, math.ceil(seconds * probe.scheduled / window) if window > 0 else probe.scheduled)


def first_requests(cfg: SearchConfig, load: float, below: Probe | None) -> int:
    """A probe's first part: `min_requests`, or the requests that fill `min_s` (× TIME_MARGIN) at the rate
    (open loop) or at the nearest lower probe's request rate × the load ratio (at most × 2: past the knee the
    rate stops growing, and a probe twice as long as needed is enough), whichever is more; at most
    `max_requests`. Sized so, a probe rarely needs an extension for its seconds, which would cost a cell."""
    n = cfg.min_requests
    if cfg.over == SearchOver.RATE:
        n = max(n, math.ceil(TIME_MARGIN * cfg.min_s * load))
    elif below is not None and below.window_s > 0:
        rate = below.scheduled / below.window_s * min(load / below.load, 2.0)
        n = max(n, math.ceil(TIME_MARGIN * cfg.min_s * rate))
    return min(n, cfg.max_requests) if cfg.max_requests else n


def contradiction(cfg: SearchConfig, p: Probe, q: Probe) -> tuple[float, str] | None:
    """When probes p and q contradict each other, the load to measure again (the one that missed, or whose
    throughput fell) and why: a lower load missed where a higher one met, or throughput fell by more than
    half while the load grew."""
    lo, hi = (p, q) if p.load < q.load else (q, p)
    if lo.load == hi.load:
        return None
    if hi.met and not lo.met:
        return lo.load, (f"{cfg.name(lo.load)} missed ({lo.attainment:.0%} good) while {cfg.name(hi.load)} "
                         f"met ({hi.attainment:.0%})")
    if lo.tok_s > 0 and hi.tok_s < HALF * lo.tok_s:
        return hi.load, (f"{cfg.name(hi.load)} gave {hi.tok_s:.1f} tok/s, less than half of "
                         f"{cfg.name(lo.load)}'s {lo.tok_s:.1f}")
    return None


def disagree(a: Probe, b: Probe) -> bool:
    """Two measurements of one load disagree: one met and the other missed, or throughput × 2 apart."""
    low, high = sorted((a.tok_s, b.tok_s))
    return a.met != b.met or (high > 0 and low < HALF * high)


def resolution_text(cfg: SearchConfig) -> str:
    return f"{cfg.resolution:.0%} of the met load" if cfg.relative else f"{cfg.resolution:g}"


def probe_key(cfg: SearchConfig, context: int, load: float, cap: int = 0, again: int = 0) -> CellKey:
    """The cell a probe is: concurrency `load`, or rate `load` with the in-flight cap (0 = none); `again` its
    measurement of that load (0: the first)."""
    if cfg.over == SearchOver.CONCURRENCY:
        return CellKey(context, int(load), again=again)
    return CellKey(context, cap, request_rate=float(load), again=again)
