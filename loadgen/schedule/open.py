"""Open-loop load: requests arrive on a precomputed schedule at a target rate, whatever the server does.

Request i of a cell is due at t0 + offset_i (offsets from `loadgen.schedule.arrivals`, drawn once, seeded by
--seed, law and rate — the same schedule for every context, so contexts compare on identical arrivals).
`t_intended_ns` = that due time. A request waits for a slot when `--max-concurrency` requests are in flight
(an asyncio.Semaphore: a cap on concurrency, not a rate limiter, so the schedule alone sets the rate); the
wait is client queueing and shows as lateness = t_sent − t_intended, never as lost time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from loadgen.schedule.cell_run import CellRun, LoadOutcome

NS = 1e9
SLEEP_SLICE_S = 0.25  # the scheduler wakes this often at least: an interrupt is seen between sparse arrivals


async def sleep_until(run: CellRun, due_ns: int) -> None:
    """Sleep until the monotonic time `due_ns`, waking at least every SLEEP_SLICE_S to see a stop."""
    while not run.stopped and (delay_ns := due_ns - time.monotonic_ns()) > 0:
        await asyncio.sleep(min(delay_ns / NS, SLEEP_SLICE_S))


async def open_loop(run: CellRun, due_ns: Sequence[int], cap: int | None) -> LoadOutcome:
    """Send job i at the absolute monotonic time due_ns[i] (t_intended_ns = due_ns[i]), at once when late.

    With a cap, a due request first waits for one of `cap` slots; later requests queue behind it in order
    (the semaphore is FIFO), each keeping its own due time. On stop no new request goes; in-flight ones end.
    """
    slots = asyncio.Semaphore(cap or 1 << 30)  # no cap: a semaphore that never makes anyone wait
    tasks: set[asyncio.Task] = set()

    async def one(job, due: int) -> None:
        try:
            await run.issue(job, due)
        finally:
            slots.release()

    try:
        for due in due_ns:
            await sleep_until(run, due)
            await slots.acquire()
            job = run.take()
            if job is None:
                slots.release()
                break
            task = asyncio.create_task(one(job, due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
        return run.outcome()
    finally:
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
