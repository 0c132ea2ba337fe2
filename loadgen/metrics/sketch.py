"""Percentiles in bounded memory: a relative-error sketch (DDSketch's log buckets), and `BoundedDistribution`,
exact while it holds few values and a sketch beyond.

`RelativeSketch(alpha)`: a positive value v falls in bucket i = ⌈ln v / ln γ⌉ with γ = (1 + α) / (1 − α); the
bucket stands for the value 2γ^i / (γ + 1), which is within a fraction α of every value of the bucket
(γ^(i−1) < v ≤ γ^i). Values ≤ 0 (two chunks in one read: a gap of 0) count in a zero bucket that stands for
0. A percentile is the bucket of the inverted-CDF rank (the smallest bucket whose cumulative weight reaches
q % of the total weight), so it is within α of the exact inverted-CDF percentile of the same values
(`stats.weighted_percentiles`). Memory: one counter per occupied bucket, at most ln(max/min) / ln γ of them
(≈ 13,800 from 1 ns to 1,000 s at α = 0.1 %), whatever the number of values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from loadgen.metrics.stats import Values, distribution, weighted_distribution, weighted_sum

ALPHA = 1e-3  # relative error of a sketched percentile
EXACT_MAX = 1 << 16  # values a distribution keeps exactly before it turns to its sketch
FLUSH_AT = 1 << 12  # values a sketched distribution buffers before it adds them to its sketch (32 KiB arrays)


class RelativeSketch:
    """Weighted values in log buckets; percentiles within relative error `alpha` (module docstring). The
    buckets are one dense array from the lowest to the highest occupied index (`lo` = the first's index)."""

    def __init__(self, alpha: float = ALPHA):
        self.alpha = alpha
        self.gamma = (1 + alpha) / (1 - alpha)
        self._log_gamma = math.log(self.gamma)
        self.counts = np.zeros(0)
        self.lo = 0
        self.zero = 0.0  # weight of values ≤ 0
        self.total = 0.0  # Σ weight
        self.weighted_sum = 0.0  # Σ value · weight (the exact mean's numerator)

    def add(self, values: Values, weights: Values | None = None) -> None:
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            return
        w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
        self.total += float(w.sum())
        self.weighted_sum += weighted_sum(v, w)
        pos = v > 0
        if not pos.all():
            self.zero += float(w[~pos].sum())
            v, w = v[pos], w[pos]
            if v.size == 0:
                return
        idx = np.ceil(np.log(v) / self._log_gamma).astype(np.int64)
        first, last = int(idx.min()), int(idx.max())
        self._cover(first, last)
        self.counts[first - self.lo:last - self.lo + 1] += np.bincount(idx - first, weights=w)

    def _cover(self, first: int, last: int) -> None:
        """Grow the bucket array to hold indices first..last."""
        if self.counts.size == 0:
            self.counts, self.lo = np.zeros(last - first + 1), first
            return
        lo, hi = min(first, self.lo), max(last, self.lo + self.counts.size - 1)
        if lo == self.lo and hi == self.lo + self.counts.size - 1:
            return
        grown = np.zeros(hi - lo + 1)
        grown[self.lo - lo:self.lo - lo + self.counts.size] = self.counts
        self.counts, self.lo = grown, lo

    def value(self, index: int) -> float:
        """The value bucket `index` stands for: 2γ^i / (γ + 1)."""
        return 2.0 * math.exp(index * self._log_gamma) / (self.gamma + 1.0)

    def percentiles(self, qs: Sequence[float]) -> list[float | None]:
        """Inverted-CDF percentiles (0..100), each within `alpha` of the exact one; None when empty."""
        if self.total <= 0:
            return [None for _ in qs]
        cum = np.cumsum(np.append(self.zero, self.counts))
        out: list[float | None] = []
        for q in qs:
            rank = max(q / 100.0 * self.total * (1 - 1e-12), 1e-300)  # rounding of the sums; q = 0: the minimum
            i = min(int(np.searchsorted(cum, rank, side="left")), len(cum) - 1)
            out.append(0.0 if i == 0 else self.value(self.lo + i - 1))
        return out

    def mean(self) -> float | None:
        return self.weighted_sum / self.total if self.total > 0 else None


class BoundedDistribution:
    """A cell's distribution of many values in bounded memory: its values kept exactly until there are more
    than `exact_max` of them (figures then exactly as `stats.distribution` / `stats.weighted_distribution`),
    after that a `RelativeSketch` (percentiles within `alpha`, inverted CDF; mean and samples exact)."""

    def __init__(self, weighted: bool, exact_max: int = EXACT_MAX, alpha: float = ALPHA):
        self.weighted = weighted
        self.exact_max = exact_max
        self.alpha = alpha
        self.values: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []
        self.held = 0  # values in `values`
        self.sketch: RelativeSketch | None = None

    @property
    def exact(self) -> bool:
        return self.sketch is None

    def add(self, values: Values, weights: Values | None = None) -> None:
        """Add values (with their weights, for a weighted distribution). Once sketched, values wait in a
        short buffer (`FLUSH_AT`) and go into the sketch together: one pass of array arithmetic per batch."""
        self.values.append(np.asarray(values, dtype=float))
        if self.weighted:
            self.weights.append(np.asarray(weights, dtype=float))
        self.held += len(values)
        if self.sketch is None and self.held > self.exact_max:
            self.sketch = RelativeSketch(self.alpha)
        if self.sketch is not None and self.held >= FLUSH_AT:
            self._flush()

    def _flush(self) -> None:
        assert self.sketch is not None  # flushed once sketched
        values, weights = self._exact()
        self.sketch.add(values, weights if self.weighted else None)
        self.values, self.weights, self.held = [], [], 0

    def _exact(self) -> tuple[np.ndarray, np.ndarray]:
        cat = np.concatenate
        return (cat(self.values) if self.values else np.empty(0),
                cat(self.weights) if self.weights else np.empty(0))

    def summary(self, qs: Sequence[int] = (50, 90, 99)) -> dict:
        """{mean, p…, samples}: the figures of `stats.distribution` (unweighted) or
        `stats.weighted_distribution` (weighted), exactly or from the sketch."""
        if self.sketch is None:
            values, weights = self._exact()
            return weighted_distribution(values, weights, qs) if self.weighted else distribution(values, qs)
        self._flush()
        s = self.sketch
        if s.total <= 0:
            return {"mean": None, **{f"p{q}": None for q in qs}, "samples": 0}
        return {"mean": s.mean(), **{f"p{q}": v for q, v in zip(qs, s.percentiles(qs))},
                "samples": round(s.total)}
