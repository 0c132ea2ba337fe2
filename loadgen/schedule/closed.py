"""Closed-loop scheduling: exactly C requests in flight; a slot sends its next request when its previous
one ends. The intended send time of a closed-loop request is the moment its slot became free (or, with a
gate, when the gate let it go).

The first wave: with `ramp_s` > 0 slot i (0 … C−1) starts at i·ramp_s/C instead of all C at once, so a server
does not get C prefills in the same instant (`--slot-ramp`; a slot's first request is intended at its start).

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
                      gate: StartGate | None = None, ramp_s: float = 0.0) -> LoadOutcome:
    """`slots` requests in flight until the run has no job left or is stopped; `pause` runs after each
    request ends (the server-down back-off). With a `gate` (`--max-request-rate`) a free slot first waits
    for the gate, and its intended send time is when the gate lets it go. With `ramp_s` the slots start
    spread over it (module docstring)."""
    async def slot(i: int) -> None:
        if ramp_s > 0 and i:
            await asyncio.sleep(i * ramp_s / slots)
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

    await asyncio.gather(*(slot(i) for i in range(slots)))
    return run.outcome()
