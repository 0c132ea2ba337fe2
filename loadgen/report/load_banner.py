"""The line said once before a run about the kind of load it sends (the CLI chooses whether to say it)."""

from __future__ import annotations

from loadgen.config import OpenLoopConfig, TraceConfig
from loadgen.names import ArrivalLaw


def open_loop_banner(o: OpenLoopConfig) -> str:
    """`open loop: poisson arrivals, rates 5,10 req/s, cap none (--concurrency is not used)`."""
    ramp = o.ramp
    rates = o.request_rate or []  # an open loop has rates where it has no ramp
    load = (f"ramp {ramp.r0:g}→{ramp.r1:g} req/s over {ramp.duration_s:g} s" if ramp
            else "rates " + ",".join(f"{r:g}" for r in rates) + " req/s")
    burst = f" (burstiness {o.burstiness:g})" if o.arrival == ArrivalLaw.GAMMA else ""
    return (f"open loop: {o.arrival} arrivals{burst}, {load}, cap {o.max_concurrency or 'none'} "
            "(--concurrency is not used)")


def throttle_banner(max_request_rate: float) -> str:
    """The closed loop under `--max-request-rate`."""
    return f"closed loop with a ceiling: at most {max_request_rate:g} request starts per second"


def trace_banner(t: TraceConfig) -> str:
    """`trace replay: FILE at speed 1,2 (mean 20,40 req/s), cap none (--concurrency is not used)`."""
    speeds = ",".join(f"{s:g}" for s in t.trace_speeds)
    rates = ",".join(f"{r:g}" for r in t.trace_rates)
    return (f"trace replay: {t.trace} at speed {speeds} (mean {rates} req/s), cap {t.trace_max_concurrency or 'none'} "
            "(--concurrency is not used)")
