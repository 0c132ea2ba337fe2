"""The measured streaming request over the lean HTTP/1.1 pool (`loadgen.client.h1`), into its `Record`.

Same contract and record semantics as `loadgen.client.aiohttp_sender.send` (the aiohttp path, kept as
`--http-client aiohttp`), through the same `loadgen.client.recorder.StreamRecorder`: timestamps are taken
when a read's bytes arrive (here: in `data_received`, before any parsing), errors become outcomes with a
short message, cancellation is recorded and re-raised. The SSE events of a read are parsed inside the read's
callback, so a stream costs one coroutine wake-up for the whole response rather than one per read.

Timeouts (`loadgen.client.config`): `timeout_s` counts from the send; `idle_timeout_s` is the longest time
without a byte (the wait for the response head included, as aiohttp's `sock_read`); connecting has the
pool's `connect_timeout_s`. One timer per request, re-armed only when it fires (a read only stores its
time), so the per-read cost of the idle timeout is nil.
"""

from __future__ import annotations

import asyncio
import gc
import time

import orjson

from loadgen import __version__
from loadgen.client.api import PATHS
from loadgen.client.config import ClientConfig, timeout_error
from loadgen.client.h1 import Pool
from loadgen.client.h1_connection import CLOSE, CONTINUE, DONE, GIVE_EACH, HOLD_PARTIAL, Connection
from loadgen.client.recorder import (
    CANCELLED,
    END,
    ERROR_BODY_MAX,
    LEARNING,
    MORE,
    READING,
    STOP,
    StreamRecorder,
    http_error,
    one_line,
)
from loadgen.names import Api, Outcome
from loadgen.record import Record

monotonic_ns = time.monotonic_ns
# the recorder's `feed` is the connection's body reader: what it says is what the connection reads
assert (MORE, END, STOP) == (CONTINUE, DONE, CLOSE)
assert (LEARNING, READING) == (GIVE_EACH, HOLD_PARTIAL)  # and so is its `whole_chunks`


class StreamHandler:
    """The `loadgen.client.h1_connection` handler of one measured response: a 200 body is read by the stream
    recorder itself (its `feed` is the connection's body reader), another status's body becomes the error
    message; the ending, None (judge the stream) or (outcome, error), goes to the sender's future."""

    __slots__ = ("rec", "recorder", "fut", "status", "error_body", "chunk_reader")

    def __init__(self, rec: Record, api: Api, fut: asyncio.Future):
        self.rec = rec
        self.recorder = StreamRecorder(rec, api)
        self.chunk_reader: StreamRecorder | None = None  # a 200 body's chunks, read whole (`read_chunks`)
        self.fut = fut
        self.status = 0
        self.error_body = b""

    def resolve(self, result: tuple[Outcome, str] | None, now: int) -> None:
        if not self.fut.done():
            self.rec.t_end_ns = now
            self.fut.set_result(result)

    def head(self, status: int, headers: dict, now: int):
        self.status = self.rec.status = status
        if status != 200:
            return self._error_body
        self.chunk_reader = self.recorder
        return self.recorder.feed

    def end(self, now: int) -> None:
        if self.status != 200:
            self.resolve((Outcome.HTTP_ERROR, http_error(self.status, self.error_body)), now)
        else:
            self.resolve(None, now)

    def fail(self, kind: Outcome, message: str, now: int) -> None:
        self.resolve((kind, one_line(message)), now)

    def _error_body(self, data: bytes, now: int) -> int:
        if self.rec.t_first_byte_ns is None:
            self.rec.t_first_byte_ns = now
        self.error_body += data
        return CONTINUE if len(self.error_body) < ERROR_BODY_MAX else CLOSE


class Watchdog:
    """Total and idle timeouts of one request with a single timer."""

    __slots__ = ("loop", "conn", "handler", "t0_ns", "cfg", "timer")

    def __init__(self, loop, conn: Connection, handler: StreamHandler, t0_ns: int, cfg: ClientConfig):
        self.loop, self.conn, self.handler, self.t0_ns, self.cfg = loop, conn, handler, t0_ns, cfg
        self.timer = loop.call_later(min(cfg.timeout_s, cfg.idle_timeout_s), self.check)

    def check(self) -> None:
        if self.handler.fut.done():
            return
        now = monotonic_ns()
        total_at = self.t0_ns + int(self.cfg.timeout_s * 1e9)
        idle_at = max(self.conn.last_rx_ns, self.t0_ns) + int(self.cfg.idle_timeout_s * 1e9)
        if now >= total_at:
            self.fire("total", self.cfg.timeout_s, now)
        elif now >= idle_at:
            self.fire("idle", self.cfg.idle_timeout_s, now)
        else:
            self.timer = self.loop.call_later((min(total_at, idle_at) - now) / 1e9, self.check)

    def fire(self, which: str, limit_s: float, now: int) -> None:
        self.conn.abort()
        self.handler.resolve((Outcome.TIMEOUT, timeout_error(which, limit_s, self.handler.rec.chunks)), now)

    def cancel(self) -> None:
        self.timer.cancel()


class Sender:
    """`sender(body, rec)`: one streaming POST per call; the request head is built once per cell."""

    def __init__(self, pool: Pool, cfg: ClientConfig, headers: dict | None = None):
        self.pool = pool
        self.cfg = cfg
        headers = {"User-Agent": f"loadgen/{__version__}", "Accept": "*/*",
                   "Content-Type": "application/json", **(headers or {}), **(cfg.headers or {})}
        self.prefix = pool.request_prefix("POST", PATHS[cfg.api], headers)

    async def __call__(self, body: dict, rec: Record) -> Record:
        """Send `body` and stream its answer into `rec`. A request that failed on a reused connection before
        any byte of its answer arrived never reached a server that was still listening on it (it had closed the
        connection): it is sent once more on a new connection, `retried_on_new_connection` counts it, and the
        record is that of the second attempt (its `t_sent_ns` is the second send)."""
        payload = orjson.dumps(body)
        rid = b"X-Request-Id: %s\r\n" % rec.request_id.encode() if rec.request_id else b""
        request = b"%s%sContent-Length: %d\r\n\r\n%s" % (self.prefix, rid, len(payload), payload)
        rec.t_sent_ns = monotonic_ns()
        conn = await self._connection(rec, self.pool.acquire)
        if conn is None:
            return rec
        reused = conn.served > 0
        handler, result = await self._exchange(conn, request, rec)
        if reused and result is not None and result[0] is Outcome.CONNECTION_ERROR and not conn.last_rx_ns:
            rec.retried_on_new_connection += 1
            rec.t_end_ns = 0
            conn = await self._connection(rec, self.pool.connect)
            if conn is None:
                return rec
            handler, result = await self._exchange(conn, request, rec)
        return handler.recorder.finish(*(result or (None, None)))

    async def _exchange(self, conn: Connection, request: bytes, rec: Record):
        """One attempt: write `request` on `conn`, wait for the answer; (handler, what `finish` is told)."""
        loop = asyncio.get_running_loop()
        handler = StreamHandler(rec, self.cfg.api, loop.create_future())
        rec.t_sent_ns = conn.start(request, handler)
        watchdog = Watchdog(loop, conn, handler, rec.t_sent_ns, self.cfg)
        try:
            result = await handler.fut
        except asyncio.CancelledError:
            conn.abort()
            handler.recorder.finish(Outcome.CANCELLED, CANCELLED)
            raise
        finally:
            watchdog.cancel()
        return handler, result

    async def _connection(self, rec: Record, get) -> Connection | None:
        """A connection from `get` (the pool's `acquire` or `connect`), or None when there is none (the record
        is then finished)."""
        try:
            return await get()
        except asyncio.CancelledError:
            self._finish(rec, Outcome.CANCELLED, CANCELLED)
            raise
        except TimeoutError:
            self._finish(rec, Outcome.TIMEOUT, timeout_error("connect", self.pool.connect_timeout_s, 0))
        except OSError as exc:
            self._finish(rec, Outcome.CONNECTION_ERROR, one_line(f"{type(exc).__name__}: {exc}"))
        return None

    def _finish(self, rec: Record, outcome: Outcome, error: str) -> None:
        StreamRecorder(rec, self.cfg.api).finish(outcome, error)


def settle_gc() -> None:
    """Collect now and freeze what survives (modules, prompts, setup), before a cell's load.

    Otherwise a full collection over those objects (20 ms and more) falls on the cell's first wave: the
    requests behind it are sent late and the loop-lag monitor sees a stall the load never caused. Frozen
    objects are still freed by reference counting; only cycles among them would wait."""
    gc.collect()
    gc.freeze()
