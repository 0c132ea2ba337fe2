"""Confidence intervals of a cell's key figures, so that "better" means better beyond noise.

One measurement: a percentile bootstrap over the cell's ok requests (`bootstrap_interval`), the same method
for a mean, a median and a ratio of sums, none of which needs a distribution assumed (latencies are skewed, a
median has no simple standard error); its work bounded: beyond BOOTSTRAP_MAX requests a resample draws
BOOTSTRAP_MAX of them and the interval is scaled to n (`bootstrap_intervals`). Deterministic: the resampling
generator is seeded with SEED, so the same records always give the same interval. Several measurements
(`--repeat N`): Student's t interval of the mean of the N values (`repeat_interval`); a bootstrap over 3 values
says nothing. docs/definitions.md#noise.

The bootstrap sees the noise between requests of one cell; what changes from one measurement to the next (the
server's state, clocks, another tenant) only repeats show.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
SEED = 0
MIN_SAMPLES = 2  # fewer requests than this: no interval
BOOTSTRAP_MAX = 2048  # samples a resample draws: beyond, the m-out-of-n bootstrap (`bootstrap_intervals`)
_BATCH_VALUES = 1 << 16  # resampled indices held at once (512 KiB), whatever the cell's size

Statistic = Callable[..., np.ndarray]  # each column's drawn values (resamples × m) → one value per resample
Samples = Sequence[float] | np.ndarray  # one quantity per request (read as a float64 array)
Spec = tuple[Sequence[Samples], Statistic]  # paired columns, and the statistic resampled over them


def _mean(draws: np.ndarray) -> np.ndarray:
    return draws.mean(axis=1)


def _median(draws: np.ndarray) -> np.ndarray:
    return np.percentile(draws, 50, axis=1)  # linear interpolation, as `stats.percentile`


STATISTICS: dict[str, Statistic] = {"mean": _mean, "p50": _median}


def _samples(column: Samples) -> np.ndarray:
    """A column as an array: an integer array as it is (its sums are exact either way, and a float copy of
    every column is a cell's size more at the summary's peak), anything else as float64."""
    array = np.asarray(column)
    return array if array.dtype.kind in "iuf" and array.dtype.itemsize == 8 else array.astype(float)


def _draws(n: int, m: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The resamples' indices, `resamples` rows of m draws from 0..n − 1, in batches of ≤ _BATCH_VALUES (one
    generator seeded with `seed`: the same rows whatever the batch size)."""
    rng = np.random.default_rng(seed)
    batch = max(1, _BATCH_VALUES // m)
    for start in range(0, resamples, batch):
        yield rng.integers(0, n, size=(min(batch, resamples - start), m))


def bootstrap_intervals(specs: dict[str, Spec], level: float = LEVEL,
                        resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, list[float] | None]:
    """{name: [low, high]}: the percentile bootstrap interval of each statistic over its paired samples.

    Each spec is (columns, statistic): equally long sequences (one per quantity, e.g. tokens and seconds of
    each request) and a function of each column's drawn values as (resamples × m) arrays. Each resample draws
    m indices with replacement from a generator seeded with `seed`; specs with as many samples share the draws
    (they are the same draws each would make alone). n ≤ BOOTSTRAP_MAX: m = n, and low, high = the (1 − level)/2
    and (1 + level)/2 quantiles q of the resampled statistic. n > BOOTSTRAP_MAX: m = BOOTSTRAP_MAX (the
    m-out-of-n bootstrap: bounded work) and each quantile's distance from the full sample's statistic θ̂ is
    scaled from m to n samples, low, high = θ̂ + (q − θ̂) · √(m / n), which holds for the √n-consistent
    statistics here (a mean, a median, a ratio of sums): its width is within ±15 % of the full bootstrap's (which
    moves by ±11 % from one seed to another at 1000 resamples), each end's distance from θ̂ within ±25 %
    (tests/test_bootstrap_bound.py). None for fewer than MIN_SAMPLES samples."""
    found: dict[str, list[float] | None] = {name: None for name in specs}
    by_n: dict[int, list[tuple[str, list[np.ndarray], Statistic]]] = {}
    for name, (columns, statistic) in specs.items():
        arrays = [_samples(c) for c in columns]
        if len(arrays[0]) >= MIN_SAMPLES:
            by_n.setdefault(len(arrays[0]), []).append((name, arrays, statistic))
    for n, group in by_n.items():
        found |= _intervals(n, group, level, resamples, seed)
    return found


def _intervals(n: int, group: list[tuple[str, list[np.ndarray], Statistic]], level: float, resamples: int,
               seed: int) -> dict[str, list[float]]:
    """The intervals of the specs of n samples each, from one set of draws (`bootstrap_intervals`)."""
    m = min(n, BOOTSTRAP_MAX)
    drawn: list[list[np.ndarray]] = [[] for _ in group]
    for idx in _draws(n, m, resamples, seed):
        for values, (_, arrays, statistic) in zip(drawn, group):
            values.append(statistic(*(a[idx] for a in arrays)))
    tail = (1 - level) / 2
    found = {}
    for values, (name, arrays, statistic) in zip(drawn, group):
        low, high = np.quantile(np.concatenate(values), [tail, 1 - tail])
        if m < n:
            centre = float(statistic(*(a[None, :] for a in arrays))[0])
            scale = math.sqrt(m / n)
            low, high = centre + (low - centre) * scale, centre + (high - centre) * scale
        found[name] = [float(low), float(high)]
    return found


def bootstrap_interval(columns: Sequence[Samples], statistic: Callable[..., np.ndarray],
                       level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> list[float] | None:
    """[low, high]: the percentile bootstrap interval of `statistic` over n paired samples
    (`bootstrap_intervals`, one spec)."""
    return bootstrap_intervals({"": (columns, statistic)}, level, resamples, seed)[""]


def statistic_interval(samples: Sequence[float], stat: str) -> list[float] | None:
    """The bootstrap interval of the mean ("mean") or the median ("p50") of `samples`."""
    return bootstrap_interval([samples], STATISTICS[stat])


def ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ a / Σ b of each resample (rows)."""
    return a.sum(axis=1) / b.sum(axis=1)


def ratio_spec(numerators: Samples, denominators: Samples) -> Spec | None:
    """The `bootstrap_intervals` spec of Σ numerator / Σ denominator (paired per request); None when
    Σ denominator ≤ 0."""
    return None if sum(denominators) <= 0 else ([numerators, denominators], ratio)


def scaled(interval: list[float] | None, scale: float) -> list[float] | None:
    return None if interval is None else [scale * interval[0], scale * interval[1]]


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float],
                   scale: float = 1.0) -> list[float] | None:
    """The bootstrap interval of scale × Σ numerator / Σ denominator (paired per request), e.g. accept length
    = Σ tokens / Σ verify steps."""
    spec = ratio_spec(numerators, denominators)
    return None if spec is None else scaled(bootstrap_interval(*spec), scale)


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
