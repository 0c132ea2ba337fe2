"""A worker process of `--workers N` (`python -m loadgen.parallel.worker INDEX`): runs its slots of each
closed-loop cell with its own event loop, and reports every record back to the parent as the request ends.

Wire: one JSON object per line on stdin (parent → worker: setup, cell, job, end, stop, cancel, exit) and
stdout (worker → parent: ready, sent, rec, done). Workers ignore SIGINT/SIGTERM (a terminal's Ctrl-C reaches
the whole process group; the parent decides) and exit when their stdin closes.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections import deque

import orjson

from loadgen.aio import install_uvloop
from loadgen.client.aiohttp_sender import make_session
from loadgen.client.config import ClientConfig
from loadgen.client.h1_sender import settle_gc
from loadgen.record import CellKey, Record
from loadgen.run.monitor import LoopMonitor
from loadgen.run.server_down import backoff_s
from loadgen.run.transport import AiohttpTransport, H1Transport
from loadgen.schedule.closed import CellRun, Job

LINE_LIMIT = 1 << 27  # a record of a 100k-token stream is a few MB of JSON
CANCEL_GRACE_S = 10.0


class WorkerCell:
    def __init__(self, msg: dict, index: int, send, out) -> None:
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
        ccfg = ClientConfig(base_url=msg["url"], api=msg["api"], timeout_s=msg["timeout_s"],
                            idle_timeout_s=msg["idle_timeout_s"], headers=msg.get("headers") or {})
        transport = H1Transport(ccfg) if msg.get("http_client", "h1") == "h1" else AiohttpTransport(ccfg)
        session = make_session(ccfg) if isinstance(transport, AiohttpTransport) else None
        self.sender = transport.sender(session)
        self.warm = transport.warm
        self.closers.append(transport.close)
        if session is not None:
            self.closers.append(session.close)

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self.transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
        while (line := await reader.readline()) and await self.handle(orjson.loads(line)):
            pass
        if not line:
            self.cancel()
        if self.cell_task is not None:
            await asyncio.wait([self.cell_task], timeout=CANCEL_GRACE_S)
        for close in self.closers:
            result = close()
            if asyncio.iscoroutine(result):
                await result

    async def handle(self, msg: dict) -> bool:
        """One message from the parent; False when it says to exit."""
        op = msg["op"]
        if op == "job":
            self.cell.add(Job(seq=msg["seq"], phase=msg["phase"], body=msg["body"]))
        elif op == "cell":
            self.cell = WorkerCell(msg, self.index, self.sender, self.out)
            self.cell_task = asyncio.ensure_future(self.cell.main(self.warm))
        elif op in ("end", "stop"):
            self.cell.end(drop=op == "stop")
        elif op == "cancel":
            self.cancel()
        elif op == "setup":
            await self.setup(msg)
            self.out({"op": "ready"})
        return op != "exit"

    def cancel(self) -> None:
        if self.cell is not None:
            self.cell.end(drop=True)
            for t in self.cell.tasks:
                t.cancel()


def worker_entry(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    install_uvloop()
    asyncio.run(WorkerMain(int(argv[0])).main())
    return 0




if __name__ == "__main__":
    sys.exit(worker_entry(sys.argv[1:]))
