"""A cell's jobs handed to its parts on demand, and what comes back (records, 'sent' notices, a part's death)
handed to the cell's callbacks: the one scheduling policy shared by worker processes (`workers.WorkerPool`)
and Ray parts (`ray_pool.RayPool`), apart from how either is started, reached or stopped.

A part holds a few jobs ahead of its free slots (`prefetch`) and asks for one more each time it sends, so
requests go out in sequence order across parts, the first `--warmup` first, as one process would send them.
In a cell's last wave (no more jobs left than slots) a part gets a job only when a slot of its is about to
idle, so no job waits in a busy part while another part's slots idle: the ramp-down stays one request long,
as in one process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from loadgen.names import Outcome
from loadgen.parallel import wire
from loadgen.parallel.part import Part
from loadgen.record import Record
from loadgen.schedule.cell_run import CellRun


def prefetch(slots: int) -> int:
    """Jobs a worker holds beyond its busy slots: enough to cover a refill's round trip at high rates."""
    return min(64, max(2, slots // 8))


class Dispatch:
    """Jobs to workers on demand, records and 'sent' notices back to the cell's callbacks."""

    def __init__(self, run: CellRun, workers: Sequence[Part]):
        self.run = run
        self.workers = workers
        self.ended = False
        self.stopped = False
        self.unsent = 0
        self.held: dict[int, dict] = {w.index: {} for w in workers}  # seq → job, handed and not yet recorded
        self.sent: dict[int, dict[int, int]] = {w.index: {} for w in workers}  # seq → t_sent_ns, in flight
        self.dead: list[str] = []

    def give(self, w: Part) -> None:
        if self.ended:
            return
        job = self.run.take()
        if job is None:
            self.ended = True
            for other in self.workers:
                other.send(wire.End())
            return
        self.held[w.index][job.seq] = job
        w.send(wire.JobGiven(seq=job.seq, phase=job.phase, body=job.body))

    def in_tail(self) -> bool:
        """The last wave: no more jobs left than slots. From here a worker gets a job only when a request of
        its ended and it holds fewer jobs (in flight or queued) than slots, so no spare job waits in a busy
        worker while another worker's slots idle: the ramp-down stays one request long, as in one process."""
        return self.run.jobs_left() <= sum(w.slots for w in self.workers)

    def prime(self) -> None:
        # slot by slot across workers first, so the first jobs (warmup) are spread as one process spreads them
        for k in range(max(w.slots for w in self.workers)):
            for w in self.workers:
                if k < w.slots:
                    self.give(w)
        for w in self.workers:
            for _ in range(prefetch(w.slots)):
                self.give(w)

    async def read(self, w: Part) -> None:
        while True:
            msg = await w.recv()
            if msg is None:
                await w.ended()
                self.died(w)
                return
            match msg:
                case wire.Sent():
                    self.sent[w.index][msg.seq] = msg.t_ns
                    self.run.mark_sent()
                    if not self.in_tail():
                        self.give(w)
                case wire.RecordEnded():
                    self.recorded(w, msg.rec)
                case wire.Done():
                    w.result = msg.client | {"worker": w.index, "slots": w.slots}
                    self.unsent += msg.unsent
                    return

    def recorded(self, w: Part, rec: Record) -> None:
        self.held[w.index].pop(rec.seq, None)
        self.sent[w.index].pop(rec.seq, None)
        self.run.mark_ended(rec)
        if self.in_tail() and len(self.held[w.index]) < w.slots:
            self.give(w)  # fewer jobs in its hands than slots: the slot just freed would idle

    def died(self, w: Part) -> None:
        """A worker process is gone (killed, out of memory): its requests in flight get a record each
        (`cancelled`, saying why), the jobs it held unsent are not taken, and the cell stops."""
        now = time.monotonic_ns()
        why = w.gone()
        self.dead.append(why)
        for seq, job in self.held[w.index].items():
            t_sent = self.sent[w.index].get(seq)
            if t_sent is None:
                self.unsent += 1
                continue
            rec = self.run.new_record(job, t_sent)
            rec.t_sent_ns, rec.t_end_ns, rec.worker = t_sent, now, w.index
            rec.outcome, rec.error = Outcome.CANCELLED, f"{why} with the request in flight"
            self.run.mark_ended(rec)
        self.held[w.index].clear()
        self.run.stop_token.stop(why)  # the others finish what they sent; the cell is judged on what came back

    async def watch(self) -> None:
        """Forward a stop (first interrupt, server down) to the workers: no new requests, in flight finish."""
        while not self.run.stopped:
            await asyncio.sleep(0.05)
        self.stopped = True
        for w in self.workers:
            w.send(wire.Stop())

    def give_back_unsent(self) -> None:
        # Jobs handed to a worker but never sent (dropped at a stop or the deadline) count as not taken, so
        # `requests_not_sent` stays planned − sent. They were among the last taken: step the cursor back.
        self.run.put_back(self.unsent)
