"""Confidence intervals of a cell's key figures, so that "better" means better beyond noise.

One measurement: a percentile bootstrap over the cell's ok requests (`bootstrap_interval`), the same method
for a mean, a median and a ratio of sums, none of which needs a distribution assumed (latencies are skewed, a
median has no simple standard error). Deterministic: the resampling generator is seeded with SEED, so the same
records always give the same interval. Several measurements (`--repeat N`): Student's t interval of the mean
of the N values (`repeat_interval`); a bootstrap over 3 values says nothing. docs/definitions.md#noise.

The bootstrap sees the noise between requests of one cell; what changes from one measurement to the next (the
server's state, clocks, another tenant) only repeats show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
SEED = 0
MIN_SAMPLES = 2  # fewer requests than this: no interval
_BATCH_VALUES = 2_000_000  # resampled values held at once (16 MB), whatever the cell's size

Statistic = Callable[[np.ndarray], np.ndarray]  # (resamples × n) → one value per resample


def _mean(draws: np.ndarray) -> np.ndarray:
    return draws.mean(axis=1)


def _median(draws: np.ndarray) -> np.ndarray:
    return np.percentile(draws, 50, axis=1)  # linear interpolation, as `stats.percentile`


STATISTICS: dict[str, Statistic] = {"mean": _mean, "p50": _median}


def bootstrap_interval(columns: Sequence[Sequence[float]], statistic: Callable[..., np.ndarray],
                       level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> list[float] | None:
    """[low, high]: the percentile bootstrap interval of `statistic` over n paired samples.

    `columns` are equally long sequences (one per quantity, e.g. tokens and seconds of each request); each
    resample draws n indices with replacement from a generator seeded with `seed`, and `statistic` gets each
    column's drawn values as a (resamples × n) array. low, high = the (1 − level)/2 and (1 + level)/2
    quantiles of the resampled statistic. None for fewer than MIN_SAMPLES samples."""
    arrays = [np.asarray(c, dtype=float) for c in columns]
    n = len(arrays[0])
    if n < MIN_SAMPLES:
        return None
    rng = np.random.default_rng(seed)
    batch = max(1, _BATCH_VALUES // n)
    values = []
    for start in range(0, resamples, batch):
        idx = rng.integers(0, n, size=(min(batch, resamples - start), n))
        values.append(statistic(*(a[idx] for a in arrays)))
    drawn = np.concatenate(values)
    tail = (1 - level) / 2
    low, high = np.quantile(drawn, [tail, 1 - tail])
    return [float(low), float(high)]


def statistic_interval(samples: Sequence[float], stat: str) -> list[float] | None:
    """The bootstrap interval of the mean ("mean") or the median ("p50") of `samples`."""
    return bootstrap_interval([samples], STATISTICS[stat])


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float],
                   scale: float = 1.0) -> list[float] | None:
    """The bootstrap interval of scale × Σ numerator / Σ denominator (paired per request), e.g. accept length
    = Σ tokens / Σ verify steps."""
    if sum(denominators) <= 0:
        return None
    interval = bootstrap_interval([numerators, denominators], lambda a, b: a.sum(axis=1) / b.sum(axis=1))
    return None if interval is None else [scale * interval[0], scale * interval[1]]


# Student's t quantile t(0.975, df) for df = 1..30; beyond, the normal's 1.96 is within 2 % of it
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t_quantile_975(df: int) -> float:
    """Student's t 97.5 % quantile with `df` degrees of freedom (the two-sided 95 % factor)."""
    return _T975[df - 1] if df <= len(_T975) else 1.96


def repeat_interval(values: Sequence[float]) -> list[float] | None:
    """[low, high] = mean ± t(0.975, N − 1) · s / √N over the N repeats' values (s: the sample standard
    deviation, ddof 1); None for fewer than 2 values. Only at LEVEL 0.95 (the table holds its quantiles)."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    half = t_quantile_975(len(arr) - 1) * float(arr.std(ddof=1)) / np.sqrt(len(arr))
    centre = float(arr.mean())
    return [centre - half, centre + half]


def overlap(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    """Whether two intervals [low, high] share a point (None: no interval, counted as no overlap)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]
