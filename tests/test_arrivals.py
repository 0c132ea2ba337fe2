"""Arrival schedules, without sockets: the laws' rate and variance, the ramp's shape, determinism."""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import pytest

from loadgen.metrics.open_loop import Ramp
from loadgen.names import ArrivalLaw
from loadgen.schedule import arrivals
from loadgen.schedule.arrivals import (
    cv2,
    offsets_for_span_s,
    offsets_s,
    ramp_cumulative,
    ramp_inverse,
    ramp_offsets_s,
    realised_rate,
)

pytestmark = pytest.mark.unit

N = 10_000


def rng(seed: int = 0) -> random.Random:
    return random.Random(seed)


@pytest.mark.parametrize("rate", [0.5, 7.0, 250.0])
def test_constant_is_exact(rate):
    offs = offsets_s("constant", rate, N, rng())
    assert offs[:4] == [0.0, 1 / rate, 2 / rate, 3 / rate]
    assert offs[-1] == (N - 1) / rate  # multiplied, not summed: no float drift
    assert realised_rate(offs) == pytest.approx(rate, rel=1e-12)
    assert cv2(offs) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("law,burstiness",
                         [("poisson", None), ("gamma", 0.5), ("gamma", 1.0), ("gamma", 4.0)])
@pytest.mark.parametrize("rate", [2.0, 20.0, 300.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_laws_realise_the_target_rate(law, burstiness, rate, seed):
    offs = offsets_s(law, rate, N, rng(seed), burstiness)
    assert len(offs) == N and offs[0] == 0.0
    assert all(b > a for a, b in pairwise(offs))
    assert realised_rate(offs) == pytest.approx(rate, rel=0.02)


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 4.0])
def test_gamma_burstiness_sets_the_variance(burstiness):
    """CV² of the gaps = 1/burstiness (10 % tolerance: a sample CV² of 10,000 heavy-tailed gaps moves ~5 %)"""
    offs = offsets_s("gamma", 10.0, N, rng(7), burstiness)
    assert cv2(offs) == pytest.approx(1.0 / burstiness, rel=0.10)


def test_poisson_gaps_are_exponential():
    offs = offsets_s("poisson", 5.0, N, rng(3))
    gaps = np.diff(offs)
    assert cv2(offs) == pytest.approx(1.0, rel=0.08)
    # P(gap > mean) = e^-1 for an exponential law
    assert np.mean(gaps > 0.2) == pytest.approx(np.exp(-1), abs=0.015)


def test_burstier_is_burstier():
    """At one rate, the busiest second holds more arrivals as burstiness falls."""
    def busiest(b):
        offs = np.array(offsets_s("gamma", 20.0, N, rng(11), b))
        return np.bincount(offs.astype(int)).max()
    assert busiest(0.2) > busiest(1.0) > busiest(10.0)


def test_same_seed_same_schedule_and_seeds_differ():
    a = offsets_s("poisson", 10.0, 100, rng(5))
    assert a == offsets_s("poisson", 10.0, 100, rng(5))
    assert a != offsets_s("poisson", 10.0, 100, rng(6))


def test_span_keeps_the_lead_then_exactly_the_span():
    offs = offsets_for_span_s("constant", 4.0, 2.0, rng(), lead=3)
    # 3 warmup arrivals (0, .25, .5), then every arrival within 2 s of the 4th (0.75 .. 2.5)
    assert offs == [i / 4 for i in range(3 + 8)]
    offs = offsets_for_span_s("poisson", 50.0, 3.0, rng(2))
    assert offs[-1] < 3.0 and len(offs) == pytest.approx(150, rel=0.25)
    assert offsets_s("poisson", 50.0, len(offs) + 1, rng(2))[-1] >= 3.0  # the next one is outside


@pytest.mark.parametrize("r0,r1,s", [(0.0, 10.0, 8.0), (2.0, 40.0, 6.0), (5.0, 5.5, 100.0)])
def test_ramp_inverse_inverts(r0, r1, s):
    for u in (0.0, 0.3, 1.0, 17.0, ramp_cumulative(r0, r1, s, s)):
        assert ramp_cumulative(r0, r1, s, ramp_inverse(r0, r1, s, u)) == pytest.approx(u, abs=1e-9)


def test_constant_ramp_puts_arrival_k_where_the_integral_is_k():
    r0, r1, s = 2.0, 40.0, 6.0
    offs = ramp_offsets_s("constant", r0, r1, s, rng())
    assert len(offs) == 126  # Λ(6) = (2 + 40)/2 × 6 = 126 arrivals: k = 0 … 125
    for k, t in enumerate(offs):
        assert ramp_cumulative(r0, r1, s, t) == pytest.approx(k, abs=1e-9)
    # r is linear, so ∫ over a gap = r(gap midpoint) × gap = 1 exactly: the gaps shrink as 1/r
    for a, b in pairwise(offs):
        assert Ramp(r0, r1, s).rate_at((a + b) / 2) * (b - a) == pytest.approx(1.0, abs=1e-9)


def test_poisson_ramp_follows_the_rate():
    """Arrivals per quarter of the ramp match ∫r over that quarter (within 3σ of a Poisson count)."""
    r0, r1, s = 10.0, 190.0, 100.0
    offs = np.array(ramp_offsets_s("poisson", r0, r1, s, rng(4)))
    for q in range(4):
        a, b = q * s / 4, (q + 1) * s / 4
        expected = ramp_cumulative(r0, r1, s, b) - ramp_cumulative(r0, r1, s, a)
        got = np.sum((offs >= a) & (offs < b))
        assert abs(got - expected) < 3 * np.sqrt(expected), (q, got, expected)
    assert offs.max() < s


def test_gamma_ramp_draws_its_own_law():
    offs = ramp_offsets_s("gamma", 100.0, 100.000001, 200.0, rng(9), 0.5)  # a flat ramp: plain gamma at 100/s
    assert realised_rate(offs) == pytest.approx(100.0, rel=0.03)
    assert cv2(offs) == pytest.approx(2.0, rel=0.15)


@pytest.mark.parametrize("call", [
    lambda: offsets_s("poisson", 0.0, 5, rng()),
    lambda: offsets_s("poisson", float("inf"), 5, rng()),
    lambda: offsets_s("uniform", 1.0, 5, rng()),
    lambda: offsets_s("gamma", 1.0, 5, rng(), 0.0),
    lambda: ramp_offsets_s("poisson", 5.0, 5.0, 10.0, rng()),
    lambda: ramp_offsets_s("poisson", 1.0, 5.0, 0.0, rng()),
])
def test_bad_parameters_raise(call):
    with pytest.raises(ValueError):
        call()


def test_laws_are_listed():
    assert tuple(ArrivalLaw) == ("constant", "poisson", "gamma")
    assert set(arrivals.SAMPLERS) == set(ArrivalLaw)
