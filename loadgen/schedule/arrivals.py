"""Arrival schedules for open-loop load: when each request is due, as an offset in seconds from the cell's t0.

Pure functions (no clock, no I/O). The driver turns offsets into absolute due times `t0 + offset` once, so a
late request never shifts the ones after it (no chain of relative sleeps, no drift).

Laws — the gaps g between consecutive arrivals are i.i.d. with mean 1/rate:
- `constant`: g = 1/rate exactly; offset_i = i/rate, by multiplication rather than summation, so it is exact.
- `poisson`:  g ~ Exponential(rate); coefficient of variation CV² = Var(g)/E(g)² = 1.
- `gamma`:    g ~ Gamma(shape=b, scale=1/(rate·b)) with b = burstiness; E(g) = 1/rate, CV² = 1/b.
              b < 1 is burstier than Poisson, b = 1 is Poisson, b > 1 is more regular than Poisson.
The first request is due at offset 0. Gaps are not rescaled afterwards: a random schedule's realised rate,
(n − 1) / (offset_last − offset_first), is a draw around the target (σ ≈ CV/√n relative), reported beside it.

Ramp: the target rate rises linearly, r(t) = r0 + (r1 − r0)·t/S for 0 ≤ t < S. Arrival k is due at Λ⁻¹(u_k),
where Λ(t) = ∫₀ᵗ r = r0·t + (r1 − r0)·t²/(2S) and u_k is the k-th point (u_0 = 0) of a unit-rate schedule of
the same law (time rescaling: for `poisson` this is exactly an inhomogeneous Poisson process with rate r(t);
for `constant`, Λ(t_k) = k). The ramp holds every arrival with u_k < Λ(S) = (r0 + r1)·S/2.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from itertools import islice, pairwise

from loadgen.names import ArrivalLaw

Sampler = Callable[[], float]


def _constant(rate: float, rng: random.Random, burstiness: float | None) -> Sampler:
    return lambda: 1.0 / rate


def _poisson(rate: float, rng: random.Random, burstiness: float | None) -> Sampler:
    return lambda: rng.expovariate(rate)


def _gamma(rate: float, rng: random.Random, burstiness: float | None) -> Sampler:
    b = burstiness if burstiness is not None else 1.0
    if not b > 0:
        raise ValueError(f"burstiness must be > 0, got {b}")
    scale = 1.0 / (rate * b)
    return lambda: rng.gammavariate(b, scale)


SAMPLERS: dict[ArrivalLaw, Callable[[float, random.Random, float | None], Sampler]] = {
    ArrivalLaw.CONSTANT: _constant, ArrivalLaw.POISSON: _poisson, ArrivalLaw.GAMMA: _gamma}


def gap_sampler(law: ArrivalLaw, rate: float, rng: random.Random, burstiness: float | None = None) -> Sampler:
    """A function drawing one inter-arrival gap (seconds) of `law` at `rate` requests/s."""
    if not rate > 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be finite and > 0, got {rate}")
    make = SAMPLERS.get(law)
    if make is None:
        raise ValueError(f"unknown arrival law {law!r}; choose one of {', '.join(ArrivalLaw)}")
    return make(rate, rng, burstiness)


def arrivals(law: ArrivalLaw, rate: float, rng: random.Random, burstiness: float | None = None) -> Iterator[float]:
    """Offsets (s) of an endless schedule: 0, g1, g1+g2, …; `constant` yields exactly i/rate."""
    gap = gap_sampler(law, rate, rng, burstiness)
    if ArrivalLaw(law) is ArrivalLaw.CONSTANT:  # a law's name as a string is taken too
        i = 0
        while True:
            yield i / rate
            i += 1
    t = 0.0
    while True:
        yield t
        t += gap()


def offsets_s(law: ArrivalLaw, rate: float, n: int, rng: random.Random,
              burstiness: float | None = None) -> list[float]:
    """The first `n` offsets of a schedule (see `arrivals`)."""
    return list(islice(arrivals(law, rate, rng, burstiness), n))


def offsets_for_span_s(law: ArrivalLaw, rate: float, span_s: float, rng: random.Random,
                       burstiness: float | None = None, lead: int = 0) -> list[float]:
    """The first `lead` offsets (warmup), then every further offset o with o − o_lead < span_s.

    o_lead is the offset of the first arrival after the lead (0 when lead = 0), so the measured arrivals
    cover exactly `span_s` seconds of schedule whatever the warmup."""
    out: list[float] = []
    start = None
    for o in arrivals(law, rate, rng, burstiness):
        if len(out) >= lead:
            start = o if start is None else start
            if o - start >= span_s:
                break
        out.append(o)
    return out


def realised_rate(offsets: list[float]) -> float | None:
    """Realised rate of a schedule = (n − 1) / (offset_last − offset_first); None below 2 arrivals."""
    if len(offsets) < 2 or offsets[-1] <= offsets[0]:
        return None
    return (len(offsets) - 1) / (offsets[-1] - offsets[0])


def cv2(offsets: list[float]) -> float | None:
    """Squared coefficient of variation of the gaps = Var(g) / mean(g)² (population variance)."""
    gaps = [b - a for a, b in pairwise(offsets)]
    if len(gaps) < 2:
        return None
    m = sum(gaps) / len(gaps)
    var = sum((g - m) ** 2 for g in gaps) / len(gaps)
    return var / (m * m) if m > 0 else None


# ---- ramp ----------------------------------------------------------------------------------------------
def ramp_cumulative(r0: float, r1: float, duration_s: float, t_s: float) -> float:
    """Expected arrivals by t: Λ(t) = r0·t + (r1 − r0)·t²/(2S)."""
    return r0 * t_s + (r1 - r0) * t_s * t_s / (2.0 * duration_s)


def ramp_inverse(r0: float, r1: float, duration_s: float, u: float) -> float:
    """Λ⁻¹(u): the t with Λ(t) = u, as t = 2u / (r0 + √(r0² + 2u(r1 − r0)/S)).

    This form of the quadratic root has no cancellation and stays exact for r1 = r0 (t = u/r0)."""
    if u <= 0:
        return 0.0
    return 2.0 * u / (r0 + math.sqrt(r0 * r0 + 2.0 * u * (r1 - r0) / duration_s))


def ramp_offsets_s(law: ArrivalLaw, r0: float, r1: float, duration_s: float, rng: random.Random,
                   burstiness: float | None = None) -> list[float]:
    """Offsets (s) of a linear ramp from r0 to r1 req/s over `duration_s` (see the module docstring)."""
    if not (r0 >= 0 and r1 > r0 and duration_s > 0):
        raise ValueError(f"ramp needs 0 ≤ r0 < r1 and S > 0, got {r0}:{r1}:{duration_s}")
    total = ramp_cumulative(r0, r1, duration_s, duration_s)
    out = []
    for u in arrivals(law, 1.0, rng, burstiness):
        if u >= total:
            break
        out.append(ramp_inverse(r0, r1, duration_s, u))
    return out
