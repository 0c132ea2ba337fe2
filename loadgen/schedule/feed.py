"""Jobs that arrive one by one (a worker process of `--workers` gets its jobs from the parent as it sends):
the job source of a `CellRun` whose jobs are not known in advance."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from loadgen.schedule.jobs import Job


class JobFeed:
    """A free slot takes the next job that arrived, or waits for one. `end` says no more will come (with
    `drop`, those that arrived are never sent either); a job taken past `deadline_ns` (monotonic) is put back
    and ends the feed."""

    def __init__(self, deadline_ns: int | None = None):
        self.deadline_ns = deadline_ns
        self.jobs: deque[Job] = deque()
        self.waiters: deque[asyncio.Future] = deque()
        self.ended = False
        self.timed_out = False
        self.dropped: list[Job] = []

    def add(self, job: Job) -> None:
        if self.waiters:
            self.waiters.popleft().set_result(job)
        else:
            self.jobs.append(job)

    def end(self, drop: bool = False) -> None:
        if drop:
            self.dropped.extend(self.jobs)
            self.jobs.clear()
        self.ended = True
        while self.waiters:
            self.waiters.popleft().set_result(None)

    async def get(self) -> Job | None:
        job = await self._next()
        if job is not None and self.deadline_ns is not None and time.monotonic_ns() >= self.deadline_ns:
            self.jobs.appendleft(job)
            self.timed_out = True
            self.end()
            return None
        return job

    async def _next(self) -> Job | None:
        if self.jobs:
            return self.jobs.popleft()
        if self.ended:
            return None
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        return await fut

    def unsent(self) -> list[Job]:
        """The jobs that arrived and were never sent (dropped at a stop, or left at the end)."""
        return [*self.dropped, *self.jobs]
