"""Exact statistics over raw values (never averages of percentiles)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Values = Sequence[float] | np.ndarray  # raw values: a list of them, or an array


def percentile(values: Values, q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics; None when empty."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean(values: Values) -> float | None:
    """Arithmetic mean Σx / n; None when empty."""
    if len(values) == 0:
        return None
    return float(np.mean(np.asarray(values, dtype=float)))


def weighted_percentiles(values: Values, weights: Values, qs: Sequence[float]) -> list[float]:
    """Percentiles (0..100) of a distribution where `values[i]` occurs `weights[i]` times (weights > 0).

    Used for per-token ITL: a chunk of n tokens after a gap g contributes the value g/n with weight n, which
    is exactly the distribution of `[g/n] * n` without materialising it. Definition (inverted CDF): the
    smallest value v such that the cumulative weight of values ≤ v reaches q % of the total weight.
    """
    out = np.percentile(np.asarray(values, dtype=float), list(qs), weights=np.asarray(weights, dtype=float),
                        method="inverted_cdf")
    return [float(x) for x in out]


def weighted_percentile(values: Values, weights: Values, q: float) -> float | None:
    """One weighted percentile (see `weighted_percentiles`); None when there is no weight."""
    if len(values) == 0 or float(np.sum(weights)) <= 0:
        return None
    return weighted_percentiles(values, weights, [q])[0]


def distribution(values: Values, qs: Sequence[int] = (50, 90, 99)) -> dict:
    """{mean, p50, p90, p99, ..., samples} of raw values (samples = how many); every figure None when there
    are none."""
    out = {"mean": mean(values), "samples": len(values)}
    if len(values):
        arr = np.asarray(values, dtype=float)
        for q, v in zip(qs, np.percentile(arr, list(qs))):
            out[f"p{q}"] = float(v)
    else:
        out.update({f"p{q}": None for q in qs})
    return out


def weighted_sum(values: Values, weights: Values) -> float:
    """Σ value·weight: the products, summed by numpy's pairwise sum. Not a BLAS dot product: OpenBLAS splits a dot
    of over 10,000 elements across its thread pool (a distribution that turns to its sketch adds over 65,536 values at
    once), whose threads then spin awaiting more work; on the 16-core host they kept a whole extra core busy through
    the cell, doubling loadgen's CPU (benchmarks/RESULTS.md)."""
    return float(np.multiply(np.asarray(values, dtype=float), np.asarray(weights, dtype=float)).sum())


def weighted_distribution(values: Values, weights: Values,
                          qs: Sequence[int] = (50, 90, 99)) -> dict:
    """{mean, p50, ..., samples} of a weighted distribution: mean = Σ value·weight / Σ weight, percentiles by
    `weighted_percentiles`, samples = Σ weight; every figure None when the total weight is 0."""
    total = float(np.sum(weights)) if len(weights) else 0.0
    if total <= 0:
        return {"mean": None, **{f"p{q}": None for q in qs}, "samples": 0}
    m = weighted_sum(values, weights) / total
    return {"mean": m, **{f"p{q}": v for q, v in zip(qs, weighted_percentiles(values, weights, qs))},
            "samples": round(total)}
