"""A ceiling on request starts for closed-loop cells (`--max-request-rate R`), for shared endpoints with a
rate limit: C slots, but never more than R starts in any 1 s window.

The gate is asyncio-throttle's sliding log (`Throttler`): a start is let through only while fewer than
`limit` starts happened in the last `period` seconds. A whole R uses limit R per 1 s (bursts of up to R,
never more in any 1 s window); a fractional R uses one start per 1/R s (evenly spaced). A slot's intended
send time is when the gate lets it go, so time spent throttled is not counted as the server's latency.
"""

from __future__ import annotations

import time

from asyncio_throttle import Throttler

POLL_S = 0.005  # how often a throttled slot looks again: a start is at most this late past its turn
# A request reaches the server a little after the gate lets it go (its recorded start a few µs later, its
# arrival a few ms later within a burst, varying): a period longer by MARGIN_S keeps the ceiling true on the
# recorded starts and, but for a client stalled longer than that, on the server's arrivals (1 % of the rate).
MARGIN_S = 0.010


class StartGate:
    """Let request starts through at most `rate` per second; keeps how long slots waited."""

    def __init__(self, rate: float):
        self.rate = rate
        whole = float(rate).is_integer()
        self.limit, self.period_s = (int(rate), 1.0 + MARGIN_S) if whole else (1, 1.0 / rate + MARGIN_S)
        self.throttler = Throttler(rate_limit=self.limit, period=self.period_s, retry_interval=POLL_S)
        self.reset()

    def reset(self) -> None:
        """Start counting waits afresh (a cell's measured load); the log of past starts is kept, so the
        ceiling holds across warmup, measured load and cells."""
        self.waited_ns = 0
        self.waits = 0
        self.since_ns = time.monotonic_ns()

    async def wait(self) -> int:
        """Wait for the gate; the ns waited (to `charge` once the slot has a request to send)."""
        t0 = time.monotonic_ns()
        await self.throttler.acquire()
        return time.monotonic_ns() - t0

    def charge(self, waited_ns: int) -> None:
        """Count a wait that preceded a start (a wait shorter than half a poll is no throttling)."""
        if waited_ns > POLL_S * 1e9 / 2:
            self.waited_ns += waited_ns
            self.waits += 1
