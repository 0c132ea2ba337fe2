"""The state a run's parts share: whether the run is stopping and why, and the cell load being sent.

The runner, the interrupt handler and the server-down policy each hold the same `RunControl`; none of them
reaches into another, nor into a cell's load: a stop goes in through the run's `StopToken` (every cell's
token is linked to it), and what the load did comes out as its `LoadOutcome`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.schedule.cell_run import LoadOutcome, StopToken


@dataclass
class RunControl:
    stopping: bool = False  # set by the first interrupt, or when the server went away (--on-server-down stop)
    stop_reason: str = "not measured: the run stopped early"
    interrupted_by: int | None = None  # the signal number of the first interrupt
    token: StopToken = field(default_factory=StopToken)  # the run's stop: each cell's token is linked to it
    load: asyncio.Future | None = None  # the current cell's load; cancelling it cancels in-flight requests
    _outcome: Callable[[], LoadOutcome] | None = None  # what the current cell's load did so far

    def stop(self, reason: str) -> None:
        """No new cell and no new request; requests in flight finish."""
        self.stopping = True
        self.stop_reason = reason
        self.token.stop(reason)

    def loading_cell(self, load: asyncio.Future, outcome: Callable[[], LoadOutcome]) -> None:
        """The measured load now being sent, and how to read what it did so far."""
        self.load, self._outcome = load, outcome

    def loading(self) -> bool:
        return self.load is not None and not self.load.done()

    def in_flight(self) -> int:
        """Requests of the current cell's load sent and not ended (0 when no load is running)."""
        return self._outcome().in_flight if self.loading() and self._outcome is not None else 0

    def cancel_load(self) -> bool:
        """Cancel the requests in flight (each is recorded as cancelled); False when no load is running."""
        if self.load is None or not self.loading():
            return False
        self.load.cancel()
        return True
