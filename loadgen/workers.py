"""`--workers N`: a closed-loop cell's slots spread over N worker processes, each with its own event loop.

The parent keeps everything that is not the requests themselves: setup, prompts, the job list, the sinks
(JSONL, live exporter), telemetry and the summary. Per cell it tells each worker its number of slots
(`loadgen.shard.slot_counts`) and feeds it jobs on demand: a worker holds a few jobs ahead of its free slots
and asks for one more each time it sends, so requests go out in sequence order across workers, the first
`--warmup` first, as one process would send them. Every record comes back to the parent as the request ends
and goes to the parent's sinks, so there is one JSONL, one live exporter and one results file, and the cell
is summarised from the merged raw records (exact percentiles, as one process). Monotonic times compare
across processes (CLOCK_MONOTONIC is per host). `Record.worker` is the worker's number (1..N; 0 = the parent).

Client self-monitoring merges too: event-loop lag p99 over the raw lag samples of every process, CPU % of
the busiest process (saturation is per core), and the cell is saturated when any process was.

Wire: one JSON object per line on the worker's stdin (parent → worker: cell, job, end, stop, cancel, exit)
and stdout (worker → parent: ready, sent, rec, done). Workers ignore SIGINT/SIGTERM (a terminal's Ctrl-C
reaches the whole process group; the parent decides) and exit when their stdin closes.

`--workers auto` = 1 (in-process) while the largest concurrency is ≤ AUTO_STREAMS_PER_WORKER, else
min(cores − 1, ⌈C / AUTO_STREAMS_PER_WORKER⌉). Open-loop cells run in the parent (documented gap).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
import time
from collections import deque

import orjson

from loadgen.errors import UsageError
from loadgen.record import CellKey, Record
from loadgen.shard import slot_counts

AUTO_STREAMS_PER_WORKER = 256
LINE_LIMIT = 1 << 27  # a record of a 100k-token stream is a few MB of JSON
CANCEL_GRACE_S = 10.0


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


def merge_client(parent: dict | None, workers: list[dict]) -> dict:
    """The cell's `client` block over the parent and its workers: lag p99 = the larger of the p99 over every
    worker's raw lag samples and the parent's own; CPU % of the busiest process; saturated when any was."""
    from loadgen.monitor import CPU_LIMIT_PERCENT, LAG_P99_LIMIT_S
    from loadgen.stats import percentile
    lags = [lag for w in workers for lag in w.get("lags", [])]
    cpus = [w["cpu_percent"] for w in workers if w.get("cpu_percent") is not None]
    parent_cpu = (parent or {}).get("cpu_percent")
    out = dict(parent or {})
    reasons = [f"parent: {r}" for r in (parent or {}).get("reasons", [])]
    for w in workers:
        reasons += [f"worker {w['worker']}: {r}" for r in w.get("reasons", [])]
    p99 = max([x for x in (percentile(lags, 99), out.get("loop_lag_p99_s")) if x is not None], default=None)
    out.update({
        "loop_lag_p99_s": p99,
        "cpu_percent": max(cpus + ([parent_cpu] if parent_cpu is not None else [])) if cpus else parent_cpu,
        "cpu_percent_total": sum(cpus) + (parent_cpu or 0.0),
        "workers": len(workers),
        "per_worker": [{k: w.get(k) for k in ("worker", "slots", "loop_lag_p99_s", "cpu_percent",
                                              "saturated")}
                       for w in workers],
        "saturated": bool(reasons) or (p99 is not None and p99 > LAG_P99_LIMIT_S)
        or any((c or 0) > CPU_LIMIT_PERCENT for c in cpus),
        "reasons": reasons,
    })
    return out


# ---- parent side -------------------------------------------------------------------------------------------

class Worker:
    def __init__(self, index: int, proc: asyncio.subprocess.Process):
        self.index = index
        self.proc = proc
        self.slots = 0
        self.result: dict | None = None

    def send(self, msg: dict) -> None:
        if self.proc.returncode is None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(orjson.dumps(msg) + b"\n")

    async def recv(self) -> dict | None:
        line = await self.proc.stdout.readline()
        return orjson.loads(line) if line else None


class WorkerPool:
    """N worker processes for the whole run, started at the first cell that uses them."""

    def __init__(self, n: int, url: str, api: str, timeout_s: float, idle_timeout_s: float, headers: dict,
                 http_client: str):
        self.n = n
        self.setup = {"url": url, "api": api, "timeout_s": timeout_s, "idle_timeout_s": idle_timeout_s,
                      "headers": headers, "http_client": http_client}
        self.workers: list[Worker] = []
        self.broken = False  # a worker died: later cells run in the parent
        self.problems: dict[CellKey, list[str]] = {}

    async def start(self) -> None:
        procs = await asyncio.gather(*(asyncio.create_subprocess_exec(
            sys.executable, "-m", "loadgen.workers", str(i + 1), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT, start_new_session=True) for i in range(self.n)))
        self.workers = [Worker(i + 1, p) for i, p in enumerate(procs)]
        for w in self.workers:
            w.send({"op": "setup", **self.setup})
        for w in self.workers:
            msg = await asyncio.wait_for(w.recv(), 60)
            if not msg or msg.get("op") != "ready":
                raise RuntimeError(f"worker {w.index} did not start: {msg}")

    async def close(self) -> None:
        for w in self.workers:
            w.send({"op": "exit"})
            if w.proc.stdin is not None:
                w.proc.stdin.close()
        for w in self.workers:
            try:
                await asyncio.wait_for(w.proc.wait(), 10)
            except TimeoutError:
                w.proc.kill()
                await w.proc.wait()

    async def run_cell(self, run, cell: CellKey) -> list[dict]:
        """Drive one closed-loop cell over the workers; returns each active worker's client figures."""
        counts = slot_counts(cell.concurrency, self.n)
        active = [w for w, k in zip(self.workers, counts) if k > 0]
        for w, k in zip(self.workers, counts):
            w.slots, w.result = k, None
        dispatch = Dispatch(run, active)
        for w in active:
            w.send({"op": "cell", "run_id": run.run_id, "cell": cell.as_dict(), "attempt": run.attempt,
                    "slots": w.slots, "deadline_ns": run.deadline_ns})
        dispatch.prime()
        readers = [asyncio.ensure_future(dispatch.read(w)) for w in active]
        watcher = asyncio.ensure_future(dispatch.watch())
        try:
            await asyncio.gather(*readers)
        except asyncio.CancelledError:
            # a second interrupt: the workers cancel their requests, whose records still come back
            for w in active:
                w.send({"op": "cancel"})
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

    def __init__(self, run, workers: list[Worker]):
        self.run = run
        self.workers = workers
        self.ended = False
        self.stopped = False
        self.unsent = 0
        self.held: dict[int, dict] = {w.index: {} for w in workers}  # seq → job, handed and not yet recorded
        self.sent: dict[int, dict[int, int]] = {w.index: {} for w in workers}  # seq → t_sent_ns, in flight
        self.dead: list[str] = []

    def give(self, w: Worker) -> None:
        if self.ended:
            return
        job = self.run.take()
        if job is None:
            self.ended = True
            for other in self.workers:
                other.send({"op": "end"})
            return
        self.held[w.index][job.seq] = job
        w.send({"op": "job", "seq": job.seq, "phase": job.phase, "body": job.body})

    def prime(self) -> None:
        # slot by slot across workers first, so the first jobs (warmup) are spread as one process spreads them
        for k in range(max(w.slots for w in self.workers)):
            for w in self.workers:
                if k < w.slots:
                    self.give(w)
        for w in self.workers:
            for _ in range(prefetch(w.slots)):
                self.give(w)

    async def read(self, w: Worker) -> None:
        run = self.run
        while True:
            msg = await w.recv()
            if msg is None:
                try:
                    await asyncio.wait_for(w.proc.wait(), 5)  # for its exit status
                except TimeoutError:
                    pass
                self.died(w)
                return
            op = msg["op"]
            if op == "sent":
                self.sent[w.index][msg["seq"]] = msg["t_ns"]
                run.in_flight += 1
                run.on_sent()
                self.give(w)
            elif op == "rec":
                rec = Record.from_dict(msg["rec"])
                self.held[w.index].pop(rec.seq, None)
                self.sent[w.index].pop(rec.seq, None)
                run.in_flight -= 1
                run.on_record(rec)
            elif op == "done":
                w.result = msg["client"] | {"worker": w.index, "slots": w.slots}
                self.unsent += msg.get("unsent", 0)
                return

    def died(self, w: Worker) -> None:
        """A worker process is gone (killed, out of memory): its requests in flight get a record each
        (`cancelled`, saying why), the jobs it held unsent are not taken, and the cell stops."""
        now = time.monotonic_ns()
        why = f"worker {w.index} exited during the cell (exit code {w.proc.returncode})"
        self.dead.append(why)
        for seq, job in self.held[w.index].items():
            t_sent = self.sent[w.index].get(seq)
            if t_sent is None:
                self.unsent += 1
                continue
            rec = self.run.new_record(job, t_sent)
            rec.t_sent_ns, rec.t_end_ns, rec.worker = t_sent, now, w.index
            rec.outcome, rec.error = "cancelled", f"{why} with the request in flight"
            self.run.in_flight -= 1
            self.run.on_record(rec)
        self.held[w.index].clear()
        self.run.stopping = True  # the others finish what they sent; the cell is judged on what came back

    async def watch(self) -> None:
        """Forward a stop (first interrupt, server down) to the workers: no new requests, in flight finish."""
        while not self.run.stopping:
            await asyncio.sleep(0.05)
        self.stopped = True
        for w in self.workers:
            w.send({"op": "stop"})

    def give_back_unsent(self) -> None:
        # Jobs handed to a worker but never sent (dropped at a stop or the deadline) count as not taken, so
        # `requests_not_sent` stays planned − sent. They were among the last taken: step the cursor back.
        self.run.next_job = max(0, self.run.next_job - self.unsent)


# ---- worker side -----------------------------------------------------------------------------------------

class WorkerCell:
    def __init__(self, msg: dict, index: int, send, out) -> None:
        from loadgen.scheduler import CellRun
        c = msg["cell"]
        self.cell = CellKey(c["context_tokens"], c["concurrency"], c.get("request_rate"))
        self.slots = msg["slots"]
        self.deadline_ns = msg.get("deadline_ns")
        self.index = index
        self.out = out
        self.jobs: deque = deque()
        self.waiters: deque[asyncio.Future] = deque()
        self.ended = False
        self.tasks: list[asyncio.Task] = []
        self.failures = 0
        self.dropped = 0  # jobs received but never sent (a stop); the parent counts them as not taken
        self.sending = -1  # the job whose request `issue` is sending (it notifies before its first await)
        self.run = CellRun(msg["run_id"], self.cell, [], send, self.on_sent, self.on_record,
                           self.deadline_ns, attempt=msg.get("attempt", 0))

    def on_sent(self) -> None:
        self.out({"op": "sent", "seq": self.sending, "t_ns": time.monotonic_ns()})

    def on_record(self, rec: Record) -> None:
        rec.worker = self.index
        self.out({"op": "rec", "rec": rec.to_dict()})

    def add(self, job) -> None:
        if self.waiters:
            self.waiters.popleft().set_result(job)
        else:
            self.jobs.append(job)

    def end(self, drop: bool = False) -> None:
        if drop:
            self.dropped += len(self.jobs)
            self.jobs.clear()
        self.ended = True
        while self.waiters:
            self.waiters.popleft().set_result(None)

    async def next_job(self):
        if self.jobs:
            return self.jobs.popleft()
        if self.ended:
            return None
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        return await fut

    async def slot(self) -> None:
        from loadgen.server_down import backoff_s
        while True:
            t_free = time.monotonic_ns()
            job = await self.next_job()
            if job is None:
                return
            if self.deadline_ns is not None and time.monotonic_ns() >= self.deadline_ns:
                self.jobs.appendleft(job)
                self.end()
                return
            self.sending = job.seq
            rec = await self.run.issue(job, t_free)
            # back off on a refused server as the parent's slots do; the parent's guard decides when to stop
            self.failures = self.failures + 1 if rec.outcome == "connection_error" else 0
            if self.failures:
                await asyncio.sleep(backoff_s(self.failures))

    async def main(self, warm) -> None:
        from loadgen.h1send import settle_gc
        from loadgen.monitor import LoopMonitor
        settle_gc()
        if warm is not None:
            await warm(self.slots)
        monitor = LoopMonitor()
        monitor.start()
        self.tasks = [asyncio.ensure_future(self.slot()) for _ in range(self.slots)]
        await asyncio.gather(*self.tasks, return_exceptions=True)
        client = await monitor.stop()
        client["lags"] = monitor.lags
        self.out({"op": "done", "client": client, "unsent": self.dropped + len(self.jobs)})


class WorkerMain:
    def __init__(self, index: int):
        self.index = index
        self.cell: WorkerCell | None = None
        self.cell_task: asyncio.Task | None = None
        self.sender = None
        self.warm = None
        self.closers: list = []

    def out(self, msg: dict) -> None:
        self.transport.write(orjson.dumps(msg) + b"\n")

    async def setup(self, msg: dict) -> None:
        from loadgen.client import ClientConfig
        ccfg = ClientConfig(base_url=msg["url"], api=msg["api"], timeout_s=msg["timeout_s"],
                            idle_timeout_s=msg["idle_timeout_s"], headers=msg.get("headers") or {})
        if msg.get("http_client", "h1") == "h1":
            from loadgen.h1 import Pool
            from loadgen.h1send import CONNECT_TIMEOUT_S, Sender
            pool = Pool(ccfg.base_url, connect_timeout_s=CONNECT_TIMEOUT_S)
            self.sender = Sender(pool, ccfg)
            self.warm = lambda n: pool.warm(min(n, 1024))
            self.closers.append(pool.close)
        else:
            from loadgen.client import make_session, send
            session = make_session(1, ccfg)
            self.sender = lambda body, rec: send(session, ccfg, body, rec)
            self.closers.append(session.close)

    async def main(self) -> None:
        from loadgen.scheduler import Job
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self.transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
        while True:
            line = await reader.readline()
            if not line:
                self.cancel()
                break
            msg = orjson.loads(line)
            op = msg["op"]
            if op == "job":
                self.cell.add(Job(seq=msg["seq"], phase=msg["phase"], body=msg["body"]))
            elif op == "cell":
                self.cell = WorkerCell(msg, self.index, self.sender, self.out)
                self.cell_task = asyncio.ensure_future(self.cell.main(self.warm))
            elif op == "end":
                self.cell.end()
            elif op == "stop":
                self.cell.end(drop=True)
            elif op == "cancel":
                self.cancel()
            elif op == "setup":
                await self.setup(msg)
                self.out({"op": "ready"})
            elif op == "exit":
                break
        if self.cell_task is not None:
            await asyncio.wait([self.cell_task], timeout=CANCEL_GRACE_S)
        for close in self.closers:
            result = close()
            if asyncio.iscoroutine(result):
                await result

    def cancel(self) -> None:
        if self.cell is not None:
            self.cell.end(drop=True)
            for t in self.cell.tasks:
                t.cancel()


def worker_entry(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(WorkerMain(int(argv[0])).main())
    return 0


# ---- plug-in -----------------------------------------------------------------------------------------------

def parse_workers(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--workers {text!r}: give a number ≥ 1 or auto") from None
    if n < 1:
        raise UsageError(f"--workers {n}: must be ≥ 1 (1 = this process only)")
    return n


def add_options(p: argparse.ArgumentParser) -> None:
    g = next((g for g in p._action_groups if g.title == "client"), None) or p.add_argument_group("client")
    g.add_argument("--workers", default="1", metavar="N|auto",
                   help="client processes for closed-loop cells (default 1: this one); auto = cores − 1 when "
                        "the "
                        f"largest concurrency exceeds {AUTO_STREAMS_PER_WORKER} streams")


def configure(a: argparse.Namespace, cfg) -> None:
    n = parse_workers(a.workers)
    if n == "auto":
        n = auto_workers(max(cfg.concurrency))
    cfg.extras["workers"] = n


def install(runner) -> None:
    n = runner.cfg.extras.get("workers", 1)
    if n <= 1:
        return
    pools: list[WorkerPool] = []
    results: dict[CellKey, list[dict]] = {}
    setup, drive, assemble, run = runner.setup, runner.drive, runner.assemble, runner.run
    noted = []

    async def start_pool() -> WorkerPool:
        if not pools:
            cfg = runner.cfg
            pools.append(WorkerPool(n, runner.url, cfg.api, cfg.timeout_s, cfg.idle_timeout_s, runner.headers,
                                    cfg.extras.get("http_client", "h1")))
            await pools[0].start()
        return pools[0]

    async def setup_and_start(session) -> None:
        await setup(session)
        if any(c.request_rate is None for c in runner.cells_to_run()):
            await start_pool()  # before the first cell, so no cell's window holds the workers' start-up

    async def workers_drive(cell_run, cell: CellKey) -> None:
        if cell.request_rate is not None:
            if not noted:
                noted.append(True)
                from loadgen.runner import log
                log("--workers: open-loop cells run in the main process")
            await drive(cell_run, cell)
            return
        pool = await start_pool()
        if pool.broken:
            await drive(cell_run, cell)  # a worker died in an earlier cell: this one runs in the parent
            return
        results[cell_run.cell] = await pool.run_cell(cell_run, cell)

    def workers_assemble(cell: CellKey, summary: dict, res) -> dict:
        per_worker = results.pop(cell, None)
        if per_worker is not None and summary.get("client") is not None:
            summary = dict(summary)
            summary["client"] = merge_client(summary["client"], per_worker)
        entry = assemble(cell, summary, res)
        if pools and cell in pools[0].problems:
            why = "; ".join(pools[0].problems.pop(cell))
            entry["status"], entry["error"] = "failed", f"{why}: the cell stopped early"
            entry.setdefault("warnings", []).append(f"{why}; later cells run in the main process")
        return entry

    async def run_and_close() -> int:
        try:
            return await run()
        finally:
            if pools:
                await pools[0].close()

    warm_up = runner.warm_up

    async def workers_warm_up(cell_run, cell: CellKey) -> None:
        """The warmup requests go through the workers too (their records, their connections)."""
        if cell.request_rate is not None:
            await warm_up(cell_run, cell)
            return
        measure = cell_run.jobs[runner.cfg.warmup:]
        cell_run.jobs = cell_run.jobs[:runner.cfg.warmup]
        await workers_drive(cell_run, cell)
        results.pop(cell_run.cell, None)
        cell_run.jobs, cell_run.next_job = measure, 0

    runner.setup, runner.drive, runner.warm_up = setup_and_start, workers_drive, workers_warm_up
    runner.assemble, runner.run = workers_assemble, run_and_close


def _register() -> None:
    from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
    OPTION_GROUPS.append(add_options)
    CONFIGURERS.append(configure)
    RUNNER_HOOKS.append(install)


if __name__ == "__main__":
    sys.exit(worker_entry(sys.argv[1:]))
else:
    _register()
