"""Self-monitoring of the client: event-loop lag and CPU, so a saturated client is flagged, not believed.

`watch_loop_lag` is the one lag sampler: `LoopMonitor` keeps its samples for the cell's verdict, and the live
exporter shows the latest ones. The verdict and its thresholds (`client_verdict`, `LAG_P99_LIMIT_S`,
`CPU_LIMIT_PERCENT`, `LATENESS_P99_LIMIT_S`) are client-health metrics, in `loadgen.metrics.client_health`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from loadgen.aio import cancel_and_wait
from loadgen.metrics.client_health import client_verdict, late_lags
from loadgen.metrics.stats import percentile

MAX_SAMPLES = 200_000  # 2.8 h at 50 ms: a cell's verdict needs no more, and memory stays bounded


async def watch_loop_lag(interval_s: float, on_lag: Callable[[float], None]) -> None:
    """Until cancelled: sleep `interval_s` and hand `on_lag` the lag = max(0, t_woke − t_slept − interval_s)
    in seconds (monotonic clock), i.e. how long a ready callback waited for the event loop."""
    while True:
        t0 = time.monotonic()
        await asyncio.sleep(interval_s)
        on_lag(max(0.0, time.monotonic() - t0 - interval_s))


def runqueue_wait_s() -> float | None:
    """Time this thread has waited on the kernel's run queue for a core (Linux /proc/self/schedstat, 2nd
    field, ns), in s; None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class LoopMonitor:
    """The cell's client health: lag samples every `interval_s` (`watch_loop_lag`) and the process's CPU.

    `stop()` gives `client_verdict(p99 of the lags, CPU %, lateness p99, late samples)`, where CPU % = 100 ×
    process CPU time / wall time since `start()`, with `lag_total_s` = Σ lags and `runqueue_wait_s`, the time
    the loop's thread waited for a core meanwhile (`client_health.machine_busy`).
    """

    def __init__(self, interval_s: float = 0.05, on_lag=None):
        self.interval_s = interval_s
        self.lags: list[float] = []
        self.on_lag = on_lag
        self._task: asyncio.Task | None = None
        self._cpu0 = 0.0
        self._wait0: float | None = None
        self._wall0 = 0.0

    def start(self) -> None:
        self.lags = []
        self._wait0 = runqueue_wait_s()
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._task = asyncio.create_task(watch_loop_lag(self.interval_s, self._sample))

    def _sample(self, lag: float) -> None:
        if len(self.lags) < MAX_SAMPLES:
            self.lags.append(lag)
        if self.on_lag:
            self.on_lag(lag)

    async def stop(self, lateness_p99_s: float | None = None) -> dict:
        await cancel_and_wait(self._task)
        wall = time.monotonic() - self._wall0
        cpu = 100.0 * (time.process_time() - self._cpu0) / wall if wall > 0 else None
        wait = runqueue_wait_s()
        verdict = client_verdict(percentile(self.lags, 99), cpu, lateness_p99_s, late_lags(self.lags))
        return verdict | {"lag_total_s": sum(self.lags),
                          "runqueue_wait_s": None if wait is None or self._wait0 is None else wait - self._wait0}
