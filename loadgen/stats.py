"""Exact statistics over raw values (never averages of percentiles)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics; None when empty."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean(values: Sequence[float]) -> float | None:
    if len(values) == 0:
        return None
    return float(np.mean(np.asarray(values, dtype=float)))


def weighted_percentile(values: Sequence[float], weights: Sequence[float], q: float) -> float | None:
    """Percentile of a distribution where `values[i]` occurs `weights[i]` times.

    Used for per-token ITL: a chunk of n tokens after a gap g contributes the value g/n with weight n, which
    is exactly the distribution of `[g/n] * n` without materialising it. Definition: the smallest value v
    such that the cumulative weight of values ≤ v reaches q% of the total (inverted CDF).
    """
    if len(values) == 0:
        return None
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    total = cum[-1]
    if total <= 0:
        return None
    idx = int(np.searchsorted(cum, q / 100.0 * total, side="left"))
    return float(v[min(idx, len(v) - 1)])


def distribution(values: Sequence[float], qs: Sequence[int] = (50, 90, 99)) -> dict:
    """{mean, p50, p90, p99, ...} of raw values; every field None when there are none."""
    out = {"mean": mean(values)}
    if len(values):
        arr = np.asarray(values, dtype=float)
        for q, v in zip(qs, np.percentile(arr, list(qs))):
            out[f"p{q}"] = float(v)
    else:
        out.update({f"p{q}": None for q in qs})
    return out


def weighted_distribution(values: Sequence[float], weights: Sequence[float],
                          qs: Sequence[int] = (50, 90, 99)) -> dict:
    """{mean, p50, ...} of a weighted distribution (see `weighted_percentile`)."""
    total = float(np.sum(weights)) if len(weights) else 0.0
    if total <= 0:
        return {"mean": None, **{f"p{q}": None for q in qs}}
    m = float(np.dot(np.asarray(values, dtype=float), np.asarray(weights, dtype=float)) / total)
    return {"mean": m, **{f"p{q}": weighted_percentile(values, weights, q) for q in qs}}


def finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
