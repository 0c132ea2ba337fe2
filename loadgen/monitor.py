"""Self-monitoring of the client: event-loop lag and CPU, so a saturated client is flagged, not believed.

Saturation thresholds (documented in docs/performance.md): event-loop lag p99 > 10 ms, or client CPU > 90 %
of one core, or (open loop) send lateness p99 > 50 ms.
"""

from __future__ import annotations

import asyncio
import time

from loadgen.aio import cancel_and_wait
from loadgen.stats import percentile

LAG_P99_LIMIT_S = 0.010
CPU_LIMIT_PERCENT = 90.0
LATENESS_P99_LIMIT_S = 0.050


class LoopMonitor:
    """Samples event-loop lag: a task asks to wake every `interval_s`; lag = how late it actually woke."""

    def __init__(self, interval_s: float = 0.05, on_lag=None):
        self.interval_s = interval_s
        self.lags: list[float] = []
        self.on_lag = on_lag
        self._task: asyncio.Task | None = None
        self._cpu0 = 0.0
        self._wall0 = 0.0

    def start(self) -> None:
        self.lags = []
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(self.interval_s)
            lag = max(0.0, time.monotonic() - t0 - self.interval_s)
            if len(self.lags) < 200_000:
                self.lags.append(lag)
            if self.on_lag:
                self.on_lag(lag)

    async def stop(self, lateness_p99_s: float | None = None) -> dict:
        await cancel_and_wait(self._task)
        wall = time.monotonic() - self._wall0
        cpu = 100.0 * (time.process_time() - self._cpu0) / wall if wall > 0 else None
        return client_verdict(percentile(self.lags, 99), cpu, lateness_p99_s)


def client_verdict(lag_p99_s: float | None, cpu_percent: float | None, lateness_p99_s: float | None) -> dict:
    """`saturated` = lag p99 > 10 ms or CPU > 90 % or send lateness p99 > 50 ms (with the reasons)."""
    reasons = []
    if lag_p99_s is not None and lag_p99_s > LAG_P99_LIMIT_S:
        reasons.append(f"event-loop lag p99 {lag_p99_s * 1e3:.1f} ms > {LAG_P99_LIMIT_S * 1e3:.0f} ms")
    if cpu_percent is not None and cpu_percent > CPU_LIMIT_PERCENT:
        reasons.append(f"client CPU {cpu_percent:.0f}% > {CPU_LIMIT_PERCENT:.0f}%")
    if lateness_p99_s is not None and lateness_p99_s > LATENESS_P99_LIMIT_S:
        reasons.append(f"send lateness p99 {lateness_p99_s * 1e3:.0f} ms > {LATENESS_P99_LIMIT_S * 1e3:.0f} ms")
    return {"loop_lag_p99_s": lag_p99_s, "cpu_percent": cpu_percent, "saturated": bool(reasons),
            "reasons": reasons}
