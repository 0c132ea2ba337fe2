"""The noise side of the verdict across configurations (definitions.md#verdict): each configuration's estimate
at a load with its 95 % interval, the noise between runs that the drift controls measured, and the margin of
one estimate over another with its interval (the formulas are in `verdict.py`'s docstring)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from loadgen.metrics.confidence import t_quantile_975
from loadgen.results.cell_result import CellResult
from loadgen.results.compare_inputs import Run
from loadgen.results.objectives import ObjectiveSpec

Z95 = 1.96


@dataclass(frozen=True)
class BetweenRuns:
    """The relative noise between runs, pooled from everything the results hold that measured one thing twice:
    the drift controls (each run's first cell measured again after its last: d = ln(first / again), whose
    variance is twice one measurement's, 1 degree of freedom each) and every configuration measured more than
    once at a load (the same name in several results, a search's `again` cells: Σ (ln x_i − mean)², n − 1
    degrees of freedom each). s = √(Σ squares / Σ degrees of freedom), one figure for every configuration (the
    server's state and the machine move all of them alike), so two measurements of each of four
    configurations give 4 degrees of freedom, not 1 each. `effective_se` scales it by t(0.975, df) / 1.96 for
    the few degrees of freedom it rests on."""

    relative_se: float | None
    controls: int
    repeated: int = 0  # configuration × load pairs measured more than once
    df: int = 0

    @classmethod
    def of(cls, runs: Sequence[Run], figure: str, repeated: Sequence[Sequence[float]] = ()) -> BetweenRuns:
        """From the drift controls' `figure` (output_tok_s, ttft_p50_s) and the values of each configuration ×
        load measured more than once (`repeated`)."""
        squares, df, controls = 0.0, 0, 0
        for r in runs:
            drift = r.doc.get("drift") or {}
            first, again = (drift.get("first") or {}).get(figure), (drift.get("again") or {}).get(figure)
            if isinstance(first, (int, float)) and isinstance(again, (int, float)) and first > 0 and again > 0:
                squares += math.log(first / again) ** 2 / 2
                df, controls = df + 1, controls + 1
        groups = [[math.log(x) for x in values] for values in repeated if len(values) > 1]
        for logs in groups:
            centre = sum(logs) / len(logs)
            squares += sum((x - centre) ** 2 for x in logs)
            df += len(logs) - 1
        return cls(math.sqrt(squares / df) if df else None, controls, len(groups), df)

    @property
    def effective_se(self) -> float:
        return 0.0 if self.relative_se is None else self.relative_se * t_quantile_975(self.df) / Z95

    def widen(self, value: float, interval: tuple[float, float] | None) -> tuple[float, float] | None:
        """A one-measurement interval with the noise between runs added on the log scale."""
        if not self.relative_se:
            return interval
        own = 0.0 if interval is None else Estimate("", value, interval, (value,)).log_se() or 0.0
        se = math.hypot(own, self.effective_se)
        return value * math.exp(-Z95 * se), value * math.exp(Z95 * se)


@dataclass(frozen=True)
class Estimate:
    """A configuration's figure at one load: the value, its 95 % interval, each measurement's value."""

    config: str
    value: float
    interval: tuple[float, float] | None
    measurements: tuple[float, ...]

    def log_se(self) -> float | None:
        """Standard error of ln(value), from the interval: (ln high − ln low) / (2·1.96)."""
        if self.interval is None:
            return None
        low, high = self.interval
        if low > 0:
            return (math.log(high) - math.log(low)) / (2 * Z95)
        return (high - low) / (2 * Z95 * self.value)


def estimate(config: str, cells: Sequence[CellResult], spec: ObjectiveSpec,
             between: BetweenRuns = BetweenRuns(None, 0)) -> Estimate | None:
    """The configuration's estimate from its eligible cells at one load (None when none has the figure)."""
    pairs = [(v, spec.interval_of(c)) for c in cells if (v := spec.value(c)) is not None and v > 0]
    if not pairs:
        return None
    values = tuple(float(v) for v, _ in pairs)
    mean = sum(values) / len(values)
    if len(pairs) == 1:  # a figure with no interval at all (one request, a hand-made file) is taken as exact
        return Estimate(config, mean, between.widen(mean, pairs[0][1] or (mean, mean)), values)
    # n measurements: each one's variance is its own (its interval) plus the noise between runs; their mean's is
    # the average of those over n, on the log scale
    own = [Estimate("", v, iv, (v,)).log_se() or 0.0 if iv is not None else 0.0 for v, iv in pairs]
    se = math.sqrt((sum(x * x for x in own) / len(own) + between.effective_se ** 2) / len(own))
    return Estimate(config, mean, (mean * math.exp(-Z95 * se), mean * math.exp(Z95 * se)), values)


@dataclass(frozen=True)
class Margin:
    """How much better the leader is than another configuration (a fraction ≥ 0) and its 95 % interval."""

    value: float
    interval: tuple[float, float] | None

    def beats(self, resolution: float) -> bool:
        return self.interval is not None and self.interval[0] > 0 and self.value >= resolution

    def half_width(self) -> float | None:
        return None if self.interval is None else (self.interval[1] - self.interval[0]) / 2


def margin(leader: Estimate, other: Estimate, higher_is_better: bool) -> Margin:
    """`leader`'s margin over `other` (module docstring)."""
    d = math.log(leader.value / other.value) if higher_is_better else math.log(other.value / leader.value)
    a, b = leader.log_se(), other.log_se()
    if a is None or b is None:
        return Margin(math.expm1(d), None)
    se = math.hypot(a, b)
    return Margin(math.expm1(d), (math.expm1(d - Z95 * se), math.expm1(d + Z95 * se)))
