"""One cell's load as the loops see it: its jobs and the cursor over them, the stop token that ends it early,
the callbacks its records go to, and the outcome the loops hand back.

Only the schedule moves the cursor. Whoever must stop a cell (the run's control on an interrupt or
`--on-server-down stop`, the server-down guard, the workers' parent when a worker died) sets the cell's
`StopToken`; the loops look at it before every request. What the load did comes back as a `LoadOutcome`:
requests sent, in flight, the jobs never sent and why it stopped. A driver picks the jobs it sends through
views (`phase`, `split`, `untimed`): each has its own cursor and shares the cell's token, callbacks and counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from loadgen.names import Outcome, Phase
from loadgen.record import CellKey, Record, request_id_for
from loadgen.schedule.feed import JobFeed
from loadgen.schedule.jobs import Chain, Job, Tail

SendFn = Callable[[dict, Record], Awaitable[Record]]
DEADLINE = "the cell's duration (--duration-per-cell) ran out"


class StopToken:
    """Asks a load to stop: no new request, those in flight finish. A token made with others (`linked`) is
    stopped as soon as one of them is, so a cell's token follows the run's."""

    def __init__(self, *linked: StopToken):
        self._reason: str | None = None
        self._linked = linked

    def stop(self, reason: str) -> None:
        """The first reason given is kept."""
        if self._reason is None:
            self._reason = reason

    @property
    def reason(self) -> str | None:
        """Its own reason, else that of the first linked token (in the order given) that is stopped."""
        if self._reason is not None:
            return self._reason
        return next((r for t in self._linked if (r := t.reason) is not None), None)

    @property
    def stopped(self) -> bool:
        return self.reason is not None


@dataclass(frozen=True)
class LoadOutcome:
    """What a load did: requests `sent` (the whole cell's), those `in_flight` when it was read, the jobs of
    this view never sent (`unsent`, a lazy view) and why it stopped (`stopped_by`: the stop token's reason,
    DEADLINE, or None when every job was sent)."""

    sent: int
    in_flight: int
    unsent: Sequence[Job]
    stopped_by: str | None

    @property
    def measured_not_sent(self) -> int:
        """Measured jobs never sent (warmup ones left out)."""
        return sum(1 for job in self.unsent if job.phase == Phase.MEASURE)


class _Shared:
    """What every view of one cell's load shares."""

    def __init__(self, run_id: str, cell: CellKey, attempt: int, send: SendFn, on_sent: Callable[[], None],
                 on_record: Callable[[Record], None], stop: StopToken):
        self.run_id, self.cell, self.attempt, self.stop = run_id, cell, attempt, stop
        self.send, self.on_sent, self.on_record = send, on_sent, on_record
        self.sent = 0
        self.in_flight = 0
        self.measured: CellRun | None = None  # the last view made of the measured jobs: the cell's measured load
        self.duration_ns: int | None = None  # a duration-bound cell's measured load, counted from its start


class CellRun:
    """One cell's load. `jobs` are its jobs in order (the first `warmup` of them warmup), or a `JobFeed` that
    receives them one by one (a worker process); `deadline_ns` (monotonic) ends a duration-bound cell, and
    `duration_ns` moves it when the measured jobs start (`phase`): a measured load that waited (for an aligned
    start, behind its warmup) still sends for its whole duration."""

    def __init__(self, run_id: str, cell: CellKey, jobs: Sequence[Job] | JobFeed, send: SendFn,
                 on_sent: Callable[[], None], on_record: Callable[[Record], None],
                 deadline_ns: int | None = None, attempt: int = 0, *, warmup: int = 0,
                 stop: StopToken | None = None, duration_ns: int | None = None):
        shared = _Shared(run_id, cell, attempt, send, on_sent, on_record, stop or StopToken())
        shared.duration_ns = duration_ns
        if isinstance(jobs, JobFeed):
            self._init(shared, ((), ()), deadline_ns, jobs)
        else:
            self._init(shared, (jobs[:warmup], jobs[warmup:]) if warmup else ((), jobs), deadline_ns)

    def _init(self, shared: _Shared, phases: tuple[Sequence[Job], Sequence[Job]], deadline_ns: int | None,
              feed: JobFeed | None = None) -> None:
        self._shared = shared
        self._phases = phases
        self._jobs = phases[1] if not len(phases[0]) else phases[0] if not len(phases[1]) else Chain(*phases)
        self._feed = feed
        self._next = 0
        self._timed_out = False
        self._deadline_ns = deadline_ns

    def _view(self, phases: tuple[Sequence[Job], Sequence[Job]], deadline_ns: int | None,
              measured: bool = True) -> CellRun:
        view = CellRun.__new__(CellRun)
        view._init(self._shared, phases, deadline_ns)
        if measured:
            self._shared.measured = view
        return view

    # ---- views: the jobs a driver sends ------------------------------------------------------------------
    def phase(self, phase: Phase) -> CellRun:
        """The warmup jobs, or the measured ones (a duration-bound cell's deadline counted from now)."""
        warm, measure = self._phases
        if phase == Phase.WARMUP:
            return self._view((warm, ()), self._deadline_ns, measured=False)
        duration = self._shared.duration_ns
        return self._view(((), measure), self._deadline_ns if duration is None else time.monotonic_ns() + duration)

    def split(self, part: Callable[[Sequence[Job]], Sequence[Job]]) -> CellRun:
        """Each phase's jobs through `part` (this process's share of them, `--shard`)."""
        return self._view((part(self._phases[0]), part(self._phases[1])), self._deadline_ns)

    def untimed(self) -> CellRun:
        """The same jobs without the deadline (an open loop's schedule ends the cell itself)."""
        return self._view(self._phases, None)

    # ---- read by anyone --------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._shared.run_id

    @property
    def cell(self) -> CellKey:
        return self._shared.cell

    @property
    def attempt(self) -> int:
        return self._shared.attempt

    @property
    def deadline_ns(self) -> int | None:
        return self._deadline_ns

    @property
    def stop_token(self) -> StopToken:
        return self._shared.stop

    @property
    def stopped(self) -> bool:
        return self._shared.stop.stopped

    def in_flight(self) -> int:
        return self._shared.in_flight

    def jobs_left(self) -> int:
        """Jobs of this view not taken yet."""
        return len(self._feed.unsent()) if self._feed is not None else max(0, len(self._jobs) - self._next)

    def cell_outcome(self) -> LoadOutcome:
        """What the cell's measured load did: the outcome of the last view made of its measured jobs (the
        one a driver sent them through), or of this run when none was made."""
        return (self._shared.measured or self).outcome()

    def outcome(self) -> LoadOutcome:
        """What this view's load did: the cell's counts, this view's jobs never sent, why it stopped."""
        s = self._shared
        unsent = self._feed.unsent() if self._feed is not None else Tail(self._jobs, self._next)
        timed_out = self._timed_out or (self._feed is not None and self._feed.timed_out)
        return LoadOutcome(s.sent, s.in_flight, unsent, s.stop.reason or (DEADLINE if timed_out else None))

    # ---- moved by the loops ------------------------------------------------------------------------------
    def has_jobs(self) -> bool:
        """Whether a job may still be taken (a throttled slot waits for the gate only then)."""
        return not self.stopped and (self._feed is not None or self._next < len(self._jobs))

    def take(self) -> Job | None:
        """The next job, or None: stopped, no job left, or past the deadline."""
        if self.stopped or self._next >= len(self._jobs):
            return None
        if self._deadline_ns is not None and time.monotonic_ns() >= self._deadline_ns:
            self._timed_out = True
            return None
        job = self._jobs[self._next]
        self._next += 1
        return job

    async def next_job(self) -> Job | None:
        """`take`, or for a feed the next job to arrive (None once it ended)."""
        if self._feed is None:
            return self.take()
        return None if self.stopped else await self._feed.get()

    def put_back(self, n: int) -> None:
        """The last `n` jobs taken were never sent (a worker dropped them at a stop): not taken after all."""
        self._next = max(0, self._next - n)

    def new_record(self, job: Job, t_intended_ns: int) -> Record:
        s = self._shared
        return Record(run_id=s.run_id, cell=s.cell, seq=job.seq, phase=job.phase,
                      request_id=request_id_for(s.run_id, s.cell, job.seq, s.attempt),
                      t_intended_ns=t_intended_ns, attempt=s.attempt, session=job.session, turn=job.turn)

    def mark_sent(self) -> None:
        """A request of this cell went out (here, or in a worker process)."""
        s = self._shared
        s.sent += 1
        s.in_flight += 1
        s.on_sent()

    def mark_ended(self, rec: Record) -> None:
        """A request sent elsewhere (a worker process) ended with `rec`."""
        self._shared.in_flight -= 1
        self._shared.on_record(rec)

    async def issue(self, job: Job, t_intended_ns: int) -> Record:
        """Send one job; its record reaches `on_record` exactly once, even when cancelled."""
        s = self._shared
        rec = self.new_record(job, t_intended_ns)
        self.mark_sent()
        try:
            await s.send(job.body, rec)
        except asyncio.CancelledError:
            if not rec.t_end_ns:  # cancelled before the client could record anything
                rec.t_end_ns, rec.outcome, rec.error = time.monotonic_ns(), Outcome.CANCELLED, \
                    "cancelled before sending"
            s.on_record(rec)
            raise
        except Exception as exc:  # noqa: BLE001
            # a response the client did not foresee costs one record, not the run
            rec.t_end_ns = rec.t_end_ns or time.monotonic_ns()
            rec.outcome = Outcome.PROTOCOL_ERROR
            rec.error = f"client failed on the response: {type(exc).__name__}: {exc}"[:200]
        finally:
            s.in_flight -= 1
        s.on_record(rec)
        return rec
