"""`--workers N`: a closed-loop cell's slots spread over N worker processes, each with its own event loop.

The parent keeps everything that is not the requests themselves: setup, prompts, the job list, the sinks
(JSONL, live exporter), telemetry and the summary. Per cell it tells each worker its number of slots
(`loadgen.schedule.split.slot_counts`) and feeds it jobs on demand (`loadgen.parallel.dispatch`). Every record
comes back to the parent as the request ends and goes to the parent's sinks, so there is one JSONL, one live
exporter and one results file, and the cell is summarised from the merged raw records (exact percentiles, as
one process). Monotonic times compare across processes (CLOCK_MONOTONIC is per host). `Record.worker` is the
worker's number (1..N; 0 = the parent).

Client self-monitoring merges too: event-loop lag p99 over the raw lag samples of every process, CPU % of
the busiest process (saturation is per core), and the cell is saturated when any process was.

This module holds the parent's side of the processes (starting, reaching and stopping them, one cell over
them); the worker process itself is `loadgen.parallel.worker`, the messages between them
`loadgen.parallel.wire`, the driver the runner sees `loadgen.parallel.worker_driver`.

`--workers auto` = 1 (in-process) while the largest concurrency is ≤ AUTO_STREAMS_PER_WORKER, else
min(cores − 1, ⌈C / AUTO_STREAMS_PER_WORKER⌉). Open-loop cells run in the parent (documented gap).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
from collections.abc import Sequence

from loadgen.config import AUTO_STREAMS_PER_WORKER, RunConfig
from loadgen.parallel import wire
from loadgen.parallel.dispatch import Dispatch
from loadgen.parallel.part import Part
from loadgen.record import CellKey
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
