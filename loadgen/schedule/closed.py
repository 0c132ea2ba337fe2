"""Closed-loop scheduling: exactly C requests in flight; a slot sends its next request when its previous
one ends. The intended send time of a closed-loop request is the moment its slot became free (or, with a
gate, when the gate let it go).

The same loop runs a cell in this process and a worker process's slots of it (`loadgen.parallel.worker`,
whose jobs arrive from the parent through a `JobFeed`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from loadgen.record import Record
from loadgen.schedule.cell_run import CellRun, LoadOutcome
from loadgen.schedule.throttle import StartGate

Pause = Callable[[Record], Awaitable[None]]


async def closed_loop(run: CellRun, slots: int, pause: Pause | None = None,
                      gate: StartGate | None = None) -> LoadOutcome:
    """`slots` requests in flight until the run has no job left or is stopped; `pause` runs after each
    request ends (the server-down back-off). With a `gate` (`--max-request-rate`) a free slot first waits
    for the gate, and its intended send time is when the gate lets it go."""
    async def slot() -> None:
        while True:
            waited_ns = 0
            if gate is not None and run.has_jobs():
                waited_ns = await gate.wait()  # only for a job that is left: a slot about to end does not wait
            t_free_ns = time.monotonic_ns()
            job = await run.next_job()
            if job is None:
                return
            if gate is not None:
                gate.charge(waited_ns)  # a wait counts once it precedes a start
            rec = await run.issue(job, t_free_ns)
            if pause is not None:
                await pause(rec)

    await asyncio.gather(*(slot() for _ in range(slots)))
    return run.outcome()
