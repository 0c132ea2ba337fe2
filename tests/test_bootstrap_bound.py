"""The bootstrap's bounded work: the same intervals as the plain percentile bootstrap up to BOOTSTRAP_MAX
requests (draws shared between figures of as many requests change nothing), and beyond it the stated bound: the
width within ±15 % of the full bootstrap's, each end's distance from the figure within ±25 %."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.metrics import confidence

pytestmark = pytest.mark.unit


def full_bootstrap(columns, statistic, resamples=confidence.RESAMPLES, seed=confidence.SEED):
    """The plain percentile bootstrap: every resample draws n of n (the reference the bound is stated against)."""
    arrays = [np.asarray(c, dtype=float) for c in columns]
    n = len(arrays[0])
    rng = np.random.default_rng(seed)
    drawn = np.concatenate([statistic(*(a[idx] for a in arrays))
                            for idx in (rng.integers(0, n, size=(100, n)) for _ in range(resamples // 100))])
    low, high = np.quantile(drawn, [0.025, 0.975])
    return [float(low), float(high)]


def data(n, seed):
    rng = np.random.default_rng(seed)
    return rng.lognormal(-3, 0.8, size=n), rng.integers(50, 600, size=n).astype(float)


@pytest.mark.parametrize("n", [2, 7, 640, 1001])
def test_up_to_the_bound_the_intervals_are_the_plain_bootstraps(n):
    x, tokens = data(n, n)
    specs = {"mean": ([x], confidence.STATISTICS["mean"]), "p50": ([x], confidence.STATISTICS["p50"]),
             "ratio": ([tokens, x], confidence.ratio)}
    joint = confidence.bootstrap_intervals(specs)
    for name, (columns, statistic) in specs.items():
        assert joint[name] == full_bootstrap(columns, statistic)  # bit for bit: the same draws
        assert confidence.bootstrap_interval(columns, statistic) == joint[name]


def test_beyond_the_bound_the_interval_is_within_its_stated_error_of_the_full_bootstrap():
    n = 2 * confidence.BOOTSTRAP_MAX + 1
    for seed in range(3):
        x, tokens = data(n, seed)
        for columns, statistic in (([x], confidence.STATISTICS["mean"]), ([x], confidence.STATISTICS["p50"]),
                                   ([tokens, x], confidence.ratio)):
            centre = float(statistic(*(np.asarray(c)[None, :] for c in columns))[0])
            bounded = confidence.bootstrap_interval(columns, statistic)
            full = full_bootstrap(columns, statistic)
            assert bounded[0] < centre < bounded[1]
            assert (bounded[1] - bounded[0]) / (full[1] - full[0]) == pytest.approx(1.0, abs=0.15)
            for side in (0, 1):
                assert abs(bounded[side] - centre) / abs(full[side] - centre) == pytest.approx(1.0, abs=0.25)


def test_the_work_is_bounded_whatever_the_cell_size(monkeypatch):
    widths = []
    real = confidence._draws

    def counted(n, m, resamples, seed):
        widths.append(m)
        yield from real(n, m, resamples, seed)

    monkeypatch.setattr(confidence, "_draws", counted)
    x, _ = data(50_000, 0)
    confidence.statistic_interval(x, "mean")
    assert widths == [confidence.BOOTSTRAP_MAX]
    assert confidence._BATCH_VALUES * 8 <= 2 * 2**20  # the indices held at once: 2 MiB
