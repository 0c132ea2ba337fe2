"""A worker process of `--workers N` (`python -m loadgen.parallel.worker INDEX`): runs its slots of each
closed-loop cell with its own event loop, through the same closed loop as one process (`closed_loop`, its
jobs arriving from the parent through a `JobFeed`), and reports every record back as the request ends.

Wire: `loadgen.parallel.wire`, one message per line on stdin (parent → worker) and stdout (worker → parent).
Workers ignore SIGINT/SIGTERM (a terminal's Ctrl-C reaches the whole process group; the parent decides) and
exit when their stdin closes.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable

from loadgen.aio import install_uvloop
from loadgen.client.aiohttp_sender import make_session
from loadgen.client.config import ClientConfig
from loadgen.client.h1_sender import settle_gc
from loadgen.config import TlsConfig
from loadgen.names import Api, HttpClient, Outcome, Phase
from loadgen.parallel import wire
from loadgen.record import Record
from loadgen.run.monitor import LoopMonitor
from loadgen.run.server_down import backoff_s
from loadgen.run.transport import AiohttpTransport, H1Transport
from loadgen.schedule.cell_run import CellRun, SendFn
from loadgen.schedule.closed import closed_loop
from loadgen.schedule.feed import JobFeed
from loadgen.schedule.jobs import Job

LINE_LIMIT = 1 << 27  # a record of a 100k-token stream is a few MB of JSON
CANCEL_GRACE_S = 10.0


def _nothing() -> None:
    """The parent hears of each send from `WorkerCell.send` (with its sequence number)."""


class WorkerCell:
    """This worker's slots of one cell."""

    def __init__(self, msg: wire.CellStart, index: int, send: SendFn, out: Callable[[wire.Message], None]):
        self.slots = msg.slots
        self.index = index
        self.sender = send
        self.out = out
        self.feed = JobFeed(msg.deadline_ns)
        self.failures = 0
        self.load: asyncio.Future | None = None
        self.run = CellRun(msg.run_id, msg.cell, self.feed, self.send, _nothing, self.on_record,
                           attempt=msg.attempt)

    async def send(self, body: dict, rec: Record) -> Record:
        # runs synchronously up to the sender's first await, so `sent` leaves as the request does
        self.out(wire.Sent(seq=rec.seq, t_ns=time.monotonic_ns()))
        return await self.sender(body, rec)

    def on_record(self, rec: Record) -> None:
        rec.worker = self.index
        self.out(wire.RecordEnded(rec))

    async def pause(self, rec: Record) -> None:
        """Back off on a refused server as the parent's slots do; the parent's guard decides when to stop."""
        self.failures = self.failures + 1 if rec.outcome == Outcome.CONNECTION_ERROR else 0
        if self.failures:
            await asyncio.sleep(backoff_s(self.failures))

    async def main(self, warm: Callable[[int], Awaitable[None]] | None) -> None:
        settle_gc()
        if warm is not None:
            await warm(self.slots)
        monitor = LoopMonitor()
        monitor.start()
        self.load = asyncio.ensure_future(closed_loop(self.run, self.slots, self.pause))
        await asyncio.wait([self.load])
        client = await monitor.stop()
        client["lags"] = monitor.lags.tolist()
        self.out(wire.Done(client=client, unsent=len(self.run.outcome().unsent)))

    def cancel(self) -> None:
        """No more jobs; the requests in flight are cancelled (each still sends its record)."""
        self.feed.end(drop=True)
        if self.load is not None:
            self.load.cancel()


class WorkerMain:
    def __init__(self, index: int):
        self.index = index
        self.cell: WorkerCell | None = None
        self.cell_task: asyncio.Task | None = None
        self.sender: SendFn | None = None
        self.warm: Callable[[int], Awaitable[None]] | None = None
        self.closers: list[Callable[[], object]] = []

    def out(self, msg: wire.Message) -> None:
        self.transport.write(wire.encode(msg))

    async def setup(self, msg: wire.Setup) -> None:
        ccfg = ClientConfig(base_url=msg.url, api=Api(msg.api), timeout_s=msg.timeout_s,
                            idle_timeout_s=msg.idle_timeout_s, headers=msg.headers or {},
                            tls=TlsConfig(ca_cert=msg.ca_cert, insecure=msg.insecure))
        transport = H1Transport(ccfg) if msg.http_client == HttpClient.H1 else AiohttpTransport(ccfg)
        if isinstance(transport, AiohttpTransport):
            session = make_session(ccfg)
            self.sender = transport.sender(session)
            self.closers += [transport.close, session.close]
        else:
            self.sender = transport.sender(None)  # h1 keeps its own connection pool: no session
            self.closers.append(transport.close)
        self.warm = transport.warm

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self.transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
        await self.serve(reader)

    async def serve(self, reader: asyncio.StreamReader) -> None:
        """Answer the parent's messages from `reader` until it says to exit or the stream ends; `self.transport`
        carries the answers (a pipe to the parent, or a socket: `loadgen.parallel.ray_actor`)."""
        while (line := await reader.readline()) and await self.handle(wire.decode(line)):
            pass
        if not line:
            self.cancel()
        if self.cell_task is not None:
            await asyncio.wait([self.cell_task], timeout=CANCEL_GRACE_S)
        for close in self.closers:
            result = close()
            if asyncio.iscoroutine(result):
                await result

    async def handle(self, msg: wire.Message) -> bool:
        """One message from the parent; False when it says to exit."""
        match msg:
            case wire.JobGiven():
                assert self.cell is not None  # the parent starts a cell before it gives its jobs
                self.cell.feed.add(Job(seq=msg.seq, phase=Phase(msg.phase), body=msg.body))
            case wire.CellStart():
                assert self.sender is not None  # the parent sets a worker up before its first cell
                self.cell = WorkerCell(msg, self.index, self.sender, self.out)
                self.cell_task = asyncio.ensure_future(self.cell.main(self.warm))
            case wire.End() | wire.Stop():
                assert self.cell is not None  # the end of a cell that started
                self.cell.feed.end(drop=isinstance(msg, wire.Stop))
            case wire.Cancel():
                self.cancel()
            case wire.Ping():
                self.out(wire.Pong(t_ns=msg.t_ns, t_worker_ns=time.monotonic_ns()))
            case wire.Setup():
                await self.setup(msg)
                self.out(wire.Ready())
        return not isinstance(msg, wire.Exit)

    def cancel(self) -> None:
        if self.cell is not None:
            self.cell.cancel()


def worker_entry(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    install_uvloop()
    asyncio.run(WorkerMain(int(argv[0])).main())
    return 0


if __name__ == "__main__":
    sys.exit(worker_entry(sys.argv[1:]))
