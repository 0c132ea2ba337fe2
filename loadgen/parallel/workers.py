"""`--workers N`: a closed-loop cell's slots spread over N worker processes, each with its own event loop.

The parent keeps everything that is not the requests themselves: setup, prompts, the job list, the sinks
(JSONL, live exporter), telemetry and the summary. Per cell it tells each worker its number of slots
(`loadgen.schedule.split.slot_counts`) and feeds it jobs on demand: a worker holds a few jobs ahead of its free slots
and asks for one more each time it sends, so requests go out in sequence order across workers, the first
`--warmup` first, as one process would send them. In a cell's last wave (no more jobs left than slots) a
worker gets a job only when a slot of its is about to idle, so no job waits in a busy worker while another
worker's slots idle: the ramp-down stays one request long, as in one process. Every record comes back to the
parent as the request ends and goes to the parent's sinks, so there is one JSONL, one live exporter and one
results file, and the cell is summarised from the merged raw records (exact percentiles, as one process).
Monotonic times compare across processes (CLOCK_MONOTONIC is per host). `Record.worker` is the worker's number
(1..N; 0 = the parent).

Client self-monitoring merges too: event-loop lag p99 over the raw lag samples of every process, CPU % of
the busiest process (saturation is per core), and the cell is saturated when any process was.

The worker process itself is `loadgen.parallel.worker`, the messages between them `loadgen.parallel.wire`.

`--workers auto` = 1 (in-process) while the largest concurrency is ≤ AUTO_STREAMS_PER_WORKER, else
min(cores − 1, ⌈C / AUTO_STREAMS_PER_WORKER⌉). Open-loop cells run in the parent (documented gap).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from collections.abc import Sequence

from loadgen.config import AUTO_STREAMS_PER_WORKER, RunConfig
from loadgen.metrics.record_table import RecordTable
from loadgen.names import Outcome, Phase
from loadgen.parallel import wire
from loadgen.parallel.part import Part
from loadgen.record import CellKey, Record
from loadgen.results.findings import CellFindings
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.run.drivers import Driver
from loadgen.schedule.cell_run import CellRun
from loadgen.schedule.split import slot_counts
from loadgen.target.discover import Target

LINE_LIMIT = 1 << 27  # a record of a 100k-token stream is a few MB of JSON
CANCEL_GRACE_S = 10.0
START_TIMEOUT_S = 60.0


def auto_workers(max_concurrency: int, cores: int | None = None) -> int:
    """1 when one process suffices (≤ AUTO_STREAMS_PER_WORKER streams), else min(cores − 1, ⌈C / that⌉)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if max_concurrency <= AUTO_STREAMS_PER_WORKER or cores < 3:
        return 1
    return max(2, min(cores - 1, math.ceil(max_concurrency / AUTO_STREAMS_PER_WORKER)))


def prefetch(slots: int) -> int:
    """Jobs a worker holds beyond its busy slots: enough to cover a refill's round trip at high rates."""
    return min(64, max(2, slots // 8))


class Worker:
    def __init__(self, index: int, proc: asyncio.subprocess.Process):
        self.index = index
        self.proc = proc
        self.slots = 0
        self.result: dict | None = None

    def send(self, msg: wire.Message) -> None:
        stdin = self.proc.stdin  # a pipe: never None
        if self.proc.returncode is None and stdin is not None and not stdin.is_closing():
            stdin.write(wire.encode(msg))

    async def recv(self) -> wire.Message | None:
        line = await self.proc.stdout.readline() if self.proc.stdout is not None else b""
        return wire.decode(line) if line else None

    async def ended(self) -> None:
        """Its stream ended: wait briefly for its exit status."""
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            pass

    def gone(self) -> str:
        return f"worker {self.index} exited during the cell (exit code {self.proc.returncode})"


class WorkerPool:
    """N worker processes for the whole run, started at the first cell that uses them."""

    def __init__(self, n: int, cfg: RunConfig, url: str, headers: dict):
        self.n = n
        self.setup = wire.Setup(url=url, api=cfg.api, timeout_s=cfg.timeout_s, idle_timeout_s=cfg.idle_timeout_s,
                                headers=headers, http_client=cfg.parallel.http_client, ca_cert=cfg.tls.ca_cert,
                                insecure=cfg.tls.insecure)
        self.workers: list[Worker] = []
        self.broken = False  # a worker died: later cells run in the parent
        self.problems: dict[CellKey, list[str]] = {}

    async def start(self, target: Target | None = None) -> None:
        """Start the workers before the first cell, so no cell's window holds their start-up."""
        procs = await asyncio.gather(*(asyncio.create_subprocess_exec(
            sys.executable, "-m", "loadgen.parallel.worker", str(i + 1), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT, start_new_session=True) for i in range(self.n)))
        self.workers = [Worker(i + 1, p) for i, p in enumerate(procs)]
        for w in self.workers:
            w.send(self.setup)
        for w in self.workers:
            msg = await asyncio.wait_for(w.recv(), START_TIMEOUT_S)
            if not isinstance(msg, wire.Ready):
                raise RuntimeError(f"worker {w.index} did not start: {msg}")

    async def close(self, finished: bool = True) -> None:
        for w in self.workers:
            w.send(wire.Exit())
            if w.proc.stdin is not None:
                w.proc.stdin.close()
        for w in self.workers:
            try:
                await asyncio.wait_for(w.proc.wait(), 10)
            except TimeoutError:
                w.proc.kill()
                await w.proc.wait()

    async def run_cell(self, run: CellRun, cell: CellKey) -> list[dict]:
        return await self.run_parts(self.workers, run, cell)

    async def run_parts(self, parts: Sequence[Part], run: CellRun, cell: CellKey) -> list[dict]:
        """Drive one closed-loop cell over the parts; returns each active part's client figures."""
        counts = slot_counts(cell.concurrency, self.n)
        active = [w for w, k in zip(parts, counts) if k > 0]
        for w, k in zip(parts, counts):
            w.slots, w.result = k, None
        dispatch = Dispatch(run, active)
        for w in active:
            w.send(wire.CellStart(run_id=run.run_id, cell=cell, attempt=run.attempt, slots=w.slots,
                                  deadline_ns=run.deadline_ns))
        dispatch.prime()
        readers = [asyncio.ensure_future(dispatch.read(w)) for w in active]
        watcher = asyncio.ensure_future(dispatch.watch())
        try:
            await asyncio.gather(*readers)
        except asyncio.CancelledError:
            # a second interrupt: the workers cancel their requests, whose records still come back
            for w in active:
                w.send(wire.Cancel())
            await asyncio.wait(readers, timeout=CANCEL_GRACE_S)
            raise
        finally:
            watcher.cancel()
            for r in readers:
                r.cancel()
        dispatch.give_back_unsent()
        if dispatch.dead:
            self.problems[run.cell] = dispatch.dead
            self.broken = True
        return [w.result for w in active if w.result is not None]


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


class WorkerDriver:
    """Closed-loop cells over the pool's worker processes, warmup and measured load alike; after a worker
    died, later cells run in this process through the inner driver."""

    def __init__(self, inner: Driver, pool: WorkerPool):
        self.inner = inner
        self.pool = pool
        self.per_worker: dict[CellKey, list[dict]] = {}

    def planned_requests(self, cell: CellKey) -> int:
        return self.inner.planned_requests(cell)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            await self.inner.warm_up(run, cell)
            return
        warmup = run.phase(Phase.WARMUP)
        if warmup.jobs_left():
            await self.pool.run_cell(warmup, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        if self.pool.broken:
            await self.inner.drive(run, cell)
            return
        self.per_worker[run.cell] = await self.pool.run_cell(run.phase(Phase.MEASURE), cell)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        """The inner driver's figures, each worker's client health (`client_health.merge_client`), a death."""
        found = self.inner.finish(cell, measured)
        per_worker = self.per_worker.pop(cell, None)
        if per_worker is not None:
            found += CellFindings(workers=tuple(per_worker))
        if cell in self.pool.problems:
            why = "; ".join(self.pool.problems.pop(cell))
            found += CellFindings(incidents=(Incident(IncidentKind.WORKER_DIED, f"{why}: the cell stopped early"),),
                                  warnings=(f"{why}; later cells run in the main process",))
        return found
