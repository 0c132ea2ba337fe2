"""`loadgen search`'s decision procedure, pure: which load to probe next, and the answer the probes give.

The walk (`probes`) raises the load from `start`, `growth` times a probe, until a probe misses the SLO (or `limit` is
met); when the first probe already misses it halves the load instead, down to the smallest one. Then it
bisects the bracket [highest met, lowest missed] (geometrically while it spans ×2 or more) until `SearchConfig.width_ok`. Every probe is a normal cell
of the results file, so the same walk replayed over a file (`replay`) gives the same answer: a search
resumes like a run, and a sweep's summary reads the answer of each configuration from its cells.
A probe that is not usable (failed, skipped) ends the walk: no answer is claimed past it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_status import problem


@dataclass(frozen=True)
class SearchConfig:
    """`loadgen search`: raise the load from `start` (× `growth` a probe) until a cell misses the SLO, then
    bisect the bracket until it is no wider than the resolution (`resolution` × the met end when `relative`).
    Growth 4 reaches a knee at 100 from 1 in 4 probes and leaves a bracket that 4–5 halvings resolve to 10 %."""

    over: SearchOver = SearchOver.CONCURRENCY
    start: float = 1
    growth: float = 4
    limit: float = 1024  # the highest load probed
    resolution: float = 0.1
    relative: bool = True
    max_cells: int = 10  # probes per prompt length, at most

    def width_ok(self, lo: float, hi: float) -> bool:
        """The bracket [lo, hi] is narrow enough (for concurrency, adjacent integers always are)."""
        if self.over == SearchOver.CONCURRENCY and hi - lo <= 1:
            return True
        return hi - lo <= (self.resolution * lo if self.relative else self.resolution)


Walk = Generator[float, bool | None, "Bracket"]
LOWEST_RATE_STEPS = 4  # a first rate probe that misses is halved at most this often


@dataclass
class Bracket:
    """The walk's end: the highest load that met (`met`), the lowest that missed above it (`missed`), how
    many probes it took and why it ended."""

    met: float | None = None
    missed: float | None = None
    probes: list[float] = field(default_factory=list)
    ended: str = ""
    complete: bool = False  # it ended with an answer (not at a probe it could not use, nor at --max-cells)


def _down(cfg: SearchConfig, x: float) -> float | None:
    """The next load below a first probe that missed (None: none left to try)."""
    if cfg.over == SearchOver.CONCURRENCY:
        return None if x <= 1 else max(1, int(x) // 2)
    return x / 2 if x > cfg.start / 2 ** LOWEST_RATE_STEPS else None


def _middle(cfg: SearchConfig, lo: float, hi: float) -> float:
    """The geometric middle of a bracket of ×2 or wider (the first one spans a growth step), else the middle."""
    mid = (lo * hi) ** 0.5 if hi >= 2 * lo else (lo + hi) / 2
    if cfg.over == SearchOver.CONCURRENCY:
        return min(max(int(lo) + 1, round(mid)), int(hi) - 1)
    return float(f"{mid:.4g}")


def probes(cfg: SearchConfig) -> Walk:
    """Yields each load to probe and is sent back whether it met the SLO (None: the probe is not usable)."""
    b = Bracket()
    x = cfg.start
    while True:  # bracket: up from the start, or down when the start already misses
        if len(b.probes) >= cfg.max_cells:
            b.ended = f"stopped at --max-cells {cfg.max_cells} before a bracket was found"
            return b
        b.probes.append(x)
        met = yield x
        if met is None:
            b.ended = f"the probe at {x:g} could not be used"
            return b
        if met:
            b.met = x
            if b.missed is not None or x >= cfg.limit:
                break
            up = x * cfg.growth
            x = min(cfg.limit, int(up) if cfg.over == SearchOver.CONCURRENCY else float(f"{up:.4g}"))
        else:
            b.missed = x
            if b.met is not None:
                break
            lower = _down(cfg, x)
            if lower is None:
                b.ended, b.complete = f"even the lowest load, {x:g}, missed the SLO", True
                return b
            x = lower
    return (yield from _bisect(cfg, b))


def _bisect(cfg: SearchConfig, b: Bracket) -> Walk:
    if b.missed is None:
        b.ended, b.complete = f"met the SLO up to the limit ({cfg.limit:g}, --max)", True
        return b
    while not cfg.width_ok(b.met, b.missed):
        if len(b.probes) >= cfg.max_cells:
            b.ended = f"stopped at --max-cells {cfg.max_cells} (bracket {b.met:g}–{b.missed:g})"
            return b
        x = _middle(cfg, b.met, b.missed)
        b.probes.append(x)
        met = yield x
        if met is None:
            b.ended = f"the probe at {x:g} could not be used"
            return b
        b.met, b.missed = (x, b.missed) if met else (b.met, x)
    b.ended, b.complete = f"bracket {b.met:g}–{b.missed:g} within the resolution ({resolution_text(cfg)})", True
    return b


def resolution_text(cfg: SearchConfig) -> str:
    return f"{cfg.resolution:.0%} of the met load" if cfg.relative else f"{cfg.resolution:g}"


def probe_key(cfg: SearchConfig, context: int, load: float, cap: int = 0) -> CellKey:
    """The cell a probe is: concurrency `load`, or rate `load` with the in-flight cap (0 = none)."""
    if cfg.over == SearchOver.CONCURRENCY:
        return CellKey(context, int(load))
    return CellKey(context, cap, request_rate=float(load))


def verdict(cell: dict | None) -> bool | None:
    """Whether a probe's cell met the SLO; None when it is not usable (or holds no SLO figures)."""
    if cell is None or problem(cell) is not None or not cell.get("slo"):
        return None
    return bool(cell["slo"].get("met"))


def walk(cfg: SearchConfig, context: int, cell_of: Callable[[CellKey], dict | None], cap: int = 0
         ) -> Generator[CellKey, None, Bracket]:
    """Drives `probes` with the cells `cell_of` gives; yields the key of each probe it has no cell for yet
    (the caller measures it, then `cell_of` must give it)."""
    g = probes(cfg)
    x = next(g)
    while True:
        key = probe_key(cfg, context, x, cap)
        if cell_of(key) is None:
            yield key
        try:
            x = g.send(verdict(cell_of(key)))
        except StopIteration as end:
            return end.value


def replay(cfg: SearchConfig, context: int, cells: dict[CellKey, dict], cap: int = 0) -> Bracket:
    """The answer the stored cells give; a probe not stored (yet) ends the walk as one that cannot be used."""
    g = probes(cfg)
    x = next(g)
    while True:
        try:
            x = g.send(verdict(cells.get(probe_key(cfg, context, x, cap))))
        except StopIteration as end:
            return end.value
