"""The state a run's parts share: whether the run is stopping and why, and the cell being measured.

The runner, the interrupt handler and the server-down policy each hold the same `RunControl`; none of them
reaches into another.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from loadgen.schedule.closed import CellRun


@dataclass
class RunControl:
    stopping: bool = False  # set by the first interrupt, or when the server went away (--on-server-down stop)
    stop_reason: str = "not measured: the run stopped early"
    interrupted_by: int | None = None  # the signal number of the first interrupt
    current: CellRun | None = None  # the cell whose load is being sent
    load: asyncio.Future | None = None  # the current cell's load; cancelling it cancels in-flight requests

    def stop(self, reason: str) -> None:
        """No new cell and no new request; requests in flight finish."""
        self.stopping = True
        self.stop_reason = reason
        if self.current is not None:
            self.current.stopping = True

    def loading(self) -> bool:
        return self.load is not None and not self.load.done()

    def cancel_load(self) -> bool:
        """Cancel the requests in flight (each is recorded as cancelled); False when no load is running."""
        if not self.loading():
            return False
        self.load.cancel()
        return True
