"""Closed-loop scheduling: exactly C requests in flight; a slot sends its next request when its previous
one ends. The intended send time of a closed-loop request is the moment its slot became free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from loadgen.record import CellKey, Record
from loadgen.schedule.throttle import StartGate
from loadgen.workload.prefix import relabel


@dataclass
class Job:
    seq: int
    phase: str
    body: dict


class JobList(Sequence):
    """Jobs `start..stop-1` of a cell, made on demand: request i reuses sized body i mod len(bodies) under its
    own sequence number (still unique, so no prefix cache serves it), and the first `warmup` are warmup. A
    duration-bound cell asks for a million jobs without building a million objects."""

    def __init__(self, bodies: list[dict], stop: int, warmup: int, start: int = 0,
                 categories: list[str | None] | None = None):
        self.bodies, self.stop, self.warmup, self.start = bodies, stop, warmup, start
        self.categories = categories  # per body: its dataset row's category

    def category(self, seq: int) -> str | None:
        """The category of request `seq` (that of the body it reuses), or None."""
        return self.categories[seq % len(self.categories)] if self.categories else None

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, i):
        if isinstance(i, slice):
            lo, hi, _ = i.indices(len(self))
            return JobList(self.bodies, self.start + hi, self.warmup, self.start + lo, self.categories)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        seq = self.start + i
        n = len(self.bodies)
        body = self.bodies[seq] if seq < n else relabel(self.bodies[seq % n], seq % n, seq)
        return Job(seq=seq, phase="warmup" if seq < self.warmup else "measure", body=body)


SendFn = Callable[[dict, Record], Awaitable[Record]]


class CellRun:
    """Shared state of one cell's load: the jobs, the stop flags, and where records go."""

    def __init__(self, run_id: str, cell: CellKey, jobs: list[Job], send: SendFn,
                 on_sent: Callable[[], None], on_record: Callable[[Record], None],
                 deadline_ns: int | None = None, attempt: int = 0):
        self.run_id = run_id
        self.attempt = attempt
        self.cell = cell
        self.jobs = jobs
        self.send = send
        self.on_sent = on_sent
        self.on_record = on_record
        self.deadline_ns = deadline_ns
        self.next_job = 0
        self.stopping = False  # stop scheduling; in-flight requests finish
        self.in_flight = 0

    def take(self) -> Job | None:
        if self.stopping or self.next_job >= len(self.jobs):
            return None
        if self.deadline_ns is not None and time.monotonic_ns() >= self.deadline_ns:
            return None
        job = self.jobs[self.next_job]
        self.next_job += 1
        return job

    @property
    def _load(self) -> str:
        """The load part of request ids: the concurrency, or cap and rate for open-loop cells (unique per cell)."""
        c = self.cell
        return str(c.concurrency) if c.request_rate is None else f"{c.concurrency}r{c.request_rate:g}"

    def new_record(self, job: Job, t_intended_ns: int) -> Record:
        retry = f"-a{self.attempt}" if self.attempt else ""
        return Record(run_id=self.run_id, cell=self.cell, seq=job.seq, phase=job.phase,
                      request_id=f"{self.run_id}-{self.cell.context_tokens}-{self._load}-{job.seq}{retry}",
                      t_intended_ns=t_intended_ns, attempt=self.attempt)

    async def issue(self, job: Job, t_intended_ns: int) -> Record:
        """Send one job; its record reaches `on_record` exactly once, even when cancelled."""
        rec = self.new_record(job, t_intended_ns)
        self.in_flight += 1
        self.on_sent()
        try:
            await self.send(job.body, rec)
        except asyncio.CancelledError:
            if not rec.t_end_ns:  # cancelled before the client could record anything
                rec.t_end_ns, rec.outcome, rec.error = time.monotonic_ns(), "cancelled", "cancelled before sending"
            self.on_record(rec)
            raise
        except Exception as exc:  # noqa: BLE001
            # a response the client did not foresee costs one record, not the run
            rec.t_end_ns = rec.t_end_ns or time.monotonic_ns()
            rec.outcome = "protocol_error"
            rec.error = f"client failed on the response: {type(exc).__name__}: {exc}"[:200]
        finally:
            self.in_flight -= 1
        self.on_record(rec)
        return rec


async def closed_loop(run: CellRun, slots: int, pause: Callable[[Record], Awaitable[None]] | None = None,
                      gate: StartGate | None = None) -> None:
    """`slots` requests in flight; with a `gate` (`--max-request-rate`) a free slot first waits for the gate,
    and its intended send time is when the gate lets it go."""
    async def slot() -> None:
        while True:
            waited_ns = 0
            if gate is not None and run.next_job < len(run.jobs) and not run.stopping:
                waited_ns = await gate.wait()  # only for a job that is left: a slot about to end does not wait
            job = run.take()
            if job is None:
                return
            if gate is not None:
                gate.charge(waited_ns)  # a wait counts once it precedes a start
            rec = await run.issue(job, time.monotonic_ns())
            if pause is not None:
                await pause(rec)

    await asyncio.gather(*(slot() for _ in range(slots)))
