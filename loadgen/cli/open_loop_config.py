"""Open-loop flags to a checked `OpenLoopConfig`: `--request-rate`, `--arrival`/`--burstiness`,
`--max-concurrency` and `--ramp` with its `--slo-ttft-ms`/`--ramp-window`, each mistake a UsageError naming
the fix (exit 2). Its own module because these flags check only one another: arrivals at a rate are one
idea, apart from the closed-loop matrix and the processes that send either."""

from __future__ import annotations

import argparse
import math

from loadgen.cli.checks import parse_float_list
from loadgen.config import OpenLoopConfig, RampSpec
from loadgen.errors import UsageError
from loadgen.metrics.open_loop import MIN_RAMP_REQUESTS
from loadgen.names import ArrivalLaw


def parse_ramp(text: str) -> RampSpec:
    parts = text.split(":")
    try:
        r0, r1, s = (float(x) for x in parts)
    except ValueError:
        raise UsageError(f"--ramp {text!r}: give R0:R1:S as three numbers, e.g. --ramp 1:40:60") from None
    if not all(math.isfinite(x) for x in (r0, r1, s)) or not (0 <= r0 < r1 and s > 0):
        raise UsageError(f"--ramp {text!r}: needs 0 ≤ R0 < R1 and S > 0 (finite), e.g. --ramp 1:40:60")
    return RampSpec(r0, r1, s)


def open_loop_config(a: argparse.Namespace, warmup: int) -> OpenLoopConfig:
    rates = parse_float_list("--request-rate", a.request_rate) if a.request_rate else None
    if rates and len(set(rates)) < len(rates):
        raise UsageError(f"--request-rate {a.request_rate}: a rate appears twice; give each rate once")
    ramp = parse_ramp(a.ramp) if a.ramp else None
    if rates and ramp:
        raise UsageError("--request-rate and --ramp exclude each other; give one of them")
    on = bool(rates or ramp)
    for flag, value in (("--arrival", a.arrival), ("--max-concurrency", a.max_concurrency),
                        ("--burstiness", a.burstiness)):
        if value is not None and not on and not (a.trace and flag == "--max-concurrency"):
            raise UsageError(f"{flag} applies to open-loop load; add --request-rate R or --ramp R0:R1:S")
    law = ArrivalLaw(a.arrival or ArrivalLaw.POISSON)
    check_arrival(law, a.burstiness)
    if a.max_concurrency is not None and a.max_concurrency < 1:
        raise UsageError(f"--max-concurrency {a.max_concurrency}: must be ≥ 1 (leave it out for no cap)")
    if (a.slo_ttft_ms is not None or a.ramp_window is not None) and not ramp:
        raise UsageError("--slo-ttft-ms and --ramp-window belong to a ramp; add --ramp R0:R1:S")
    if ramp:
        check_ramp(a, ramp, warmup)
    return OpenLoopConfig(request_rate=rates, arrival=law if on else None, burstiness=a.burstiness,
                          max_concurrency=a.max_concurrency, ramp=ramp, slo_ttft_ms=a.slo_ttft_ms,
                          ramp_window_s=a.ramp_window)


def check_arrival(law: ArrivalLaw, burstiness: float | None) -> None:
    if burstiness is not None and law is not ArrivalLaw.GAMMA:
        raise UsageError("--burstiness shapes gamma arrivals only; add --arrival gamma or drop --burstiness")
    if law is ArrivalLaw.GAMMA and burstiness is None:
        raise UsageError("--arrival gamma needs --burstiness B (CV² = 1/B: 0.5 bursty, 1 Poisson, 4 regular)")
    if burstiness is not None and not (burstiness > 0 and math.isfinite(burstiness)):
        raise UsageError(f"--burstiness {burstiness}: must be a finite number > 0")


def check_ramp(a: argparse.Namespace, ramp: RampSpec, warmup: int) -> None:
    if a.slo_ttft_ms is None or not a.slo_ttft_ms > 0:
        raise UsageError("--ramp needs --slo-ttft-ms MS > 0: the TTFT p99 that defines 'sustainable'")
    if a.ramp_window is not None and not 0 < a.ramp_window <= ramp.duration_s:
        raise UsageError(f"--ramp-window {a.ramp_window}: must be > 0 and ≤ the ramp's {ramp.duration_s:g} s")
    expected = (ramp.r0 + ramp.r1) / 2 * ramp.duration_s
    if expected < warmup + MIN_RAMP_REQUESTS:
        raise UsageError(f"--ramp {a.ramp}: only about {expected:.0f} arrivals; the sustainable rate "
                         f"needs ≥ {warmup + MIN_RAMP_REQUESTS} (raise the rates or lengthen S)")
