"""The driver's side of one `--ray` part: the wire to its actor over TCP, on the driver's time base.

A `RayWorker` is what `parallel.dispatch.Dispatch` drives, as it drives a worker process: `send`, `recv`, `ended`,
`gone`. Every time that comes back (a `Sent`, a record's times) is moved onto the driver's clock by the part's
`ClockMap`, and a cell's deadline is moved onto the part's clock before it leaves, so the records and the
cell's window are all on one time base, whichever node sent the request.

A part is lost when its connection ends (its process or its node went away), or when its actor stops answering
the driver's health checks (a Ray call every `HEALTH_PERIOD_S`; `HEALTH_MISSES` missed answers, or an actor
Ray reports dead): the driver then closes the connection, so the cell never waits on a dead part.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from loadgen.parallel import wire
from loadgen.parallel.ray_clock import PINGS, SAME_CLOCK, ClockMap, Exchange, clock_map, shift_record
from loadgen.parallel.worker import LINE_LIMIT

HEALTH_PERIOD_S = 1.0
HEALTH_TIMEOUT_S = 5.0
HEALTH_MISSES = 3
ENDED_PROBE_S = 3.0
CLOCK_TIMEOUT_S = 10.0


async def ray_result(ref, timeout_s: float):
    """The value of a Ray call, awaited on this loop within `timeout_s` (TimeoutError beyond)."""
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout_s)


class RayWorker:
    """Part `index`, its actor and the node it runs on (`WorkerActor.node()`)."""

    def __init__(self, index: int, actor, node: dict):
        self.index = index
        self.actor = actor
        self.node = node
        self.slots = 0
        self.result: dict | None = None
        self.clock: ClockMap = SAME_CLOCK
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lost_reason: str | None = None
        self.lost = False

    def name(self) -> str:
        return f"worker {self.index} on {self.node['host']} (Ray node {self.node['node_id'][:12]})"

    async def connect(self, address: tuple[str, int]) -> None:
        self.reader, self.writer = await asyncio.open_connection(*address, limit=LINE_LIMIT)

    def send(self, msg: wire.Message) -> None:
        if isinstance(msg, wire.CellStart) and msg.deadline_ns is not None:
            msg = replace(msg, deadline_ns=self.clock.to_worker(msg.deadline_ns))
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(wire.encode(msg))

    async def recv(self) -> wire.Message | None:
        try:
            line = await self.reader.readline() if self.reader is not None else b""  # None: never connected
        except (ConnectionError, OSError):
            line = b""
        if not line:
            return None
        msg = wire.decode(line)
        match msg:
            case wire.Sent():
                return wire.Sent(seq=msg.seq, t_ns=self.clock.to_driver(msg.t_ns))
            case wire.RecordEnded():
                return wire.RecordEnded(shift_record(msg.rec, self.clock.offset_ns))
        return msg

    async def ended(self) -> None:
        """Its connection ended: ask Ray why (briefly: a dead node may take long to be declared dead)."""
        if self.lost_reason is None:
            self.lost_reason = await self.probe(ENDED_PROBE_S) or "its connection closed, its actor still answers"

    def gone(self) -> str:
        self.lost = True
        return f"{self.name()} lost: {self.lost_reason or 'its connection closed'}"

    async def probe(self, timeout_s: float) -> str | None:
        """Why the actor is not alive, or None when it answered within `timeout_s`."""
        from ray.exceptions import RayError

        try:
            await ray_result(self.actor.ping.remote(), timeout_s)
        except TimeoutError:
            return f"no answer to a health check within {timeout_s:g} s"
        except RayError as exc:
            return f"its actor died ({type(exc).__name__})"
        return None

    def abort(self, why: str) -> None:
        """Declare the part lost: its connection is closed, so its reader ends and the cell goes on without it."""
        self.lost_reason = why
        if self.writer is not None:
            self.writer.transport.abort()

    async def watch(self) -> None:
        """Health checks while a cell runs (module docstring)."""
        misses = 0
        while not self.lost:
            await asyncio.sleep(HEALTH_PERIOD_S)
            why = await self.probe(HEALTH_TIMEOUT_S)
            misses = misses + 1 if why and why.startswith("no answer") else 0
            if why and (misses >= HEALTH_MISSES or not why.startswith("no answer")):
                self.abort(why if not misses else f"{misses} health checks unanswered")
                return

    async def sync_clock(self, pings: int = PINGS) -> ClockMap:
        """Map the part's clock onto the driver's from `pings` ping-pong exchanges (`ray_clock`)."""
        exchanges = []
        for _ in range(pings):
            t0 = time.monotonic_ns()
            self.send(wire.Ping(t_ns=t0))
            msg = await asyncio.wait_for(self.recv(), CLOCK_TIMEOUT_S)
            t1 = time.monotonic_ns()
            if not isinstance(msg, wire.Pong) or msg.t_ns != t0:
                raise ConnectionError(f"{self.name()} answered a clock ping with {msg}")
            exchanges.append(Exchange(t0, msg.t_worker_ns, t1))
        self.clock = clock_map(exchanges)
        return self.clock

    def describe(self) -> dict:
        return {"worker": self.index, "node_id": self.node["node_id"], "host": self.node["host"],
                "ip": self.node["ip"], "cores": self.node["cores"], "pid": self.node["pid"], "slots": self.slots}
