"""The one interface every telemetry adapter implements.

A source is started when a cell's measured window opens and stopped when it closes. In between it samples
in the background (its own asyncio task). `stop()` returns a `SourceResult` whose values describe only
the window [t_start_ns, t_stop_ns] (the type is in `loadgen.metrics.source_result`: the metrics fold it, so
it lives in the lower layer). A source that could not measure says so (`available=False`, `reason`),
never returns zeros.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from loadgen.aio import cancel_and_wait
from loadgen.metrics.source_result import SourceResult


class TelemetrySource(Protocol):
    name: str
    kind: str

    async def start(self) -> None: ...

    async def stop(self) -> SourceResult: ...


class PeriodicSampler:
    """Base for sources that poll something every `interval_s` between start() and stop().

    Subclasses implement `sample(t_ns)` (one poll; exceptions are counted, not raised) and `result()`.
    A sample is taken at start and at stop, so even a cell shorter than the interval has two readings.
    """

    name = "periodic"
    kind = "generic"

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self.t_start_ns = 0
        self.t_stop_ns = 0
        self.errors: list[str] = []
        self._task: asyncio.Task | None = None

    async def sample(self, t_ns: int) -> None:
        raise NotImplementedError

    def result(self) -> SourceResult:
        raise NotImplementedError

    async def _safe_sample(self) -> None:
        t_ns = time.monotonic_ns()
        try:
            await self.sample(t_ns)
        except Exception as exc:  # a failed poll is data (the node stopped answering), not a crash
            self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._safe_sample()

    async def start(self) -> None:
        self.t_start_ns = time.monotonic_ns()
        await self._safe_sample()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> SourceResult:
        await cancel_and_wait(self._task)
        await self._safe_sample()
        self.t_stop_ns = time.monotonic_ns()
        return self.result()
