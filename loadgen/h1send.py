"""The measured streaming request over the lean HTTP/1.1 pool (`loadgen.h1`), into its `Record`.

Same contract and record semantics as `loadgen.client.send` (the aiohttp path, kept as
`--http-client aiohttp`): timestamps are taken when a read's bytes arrive (here: in `data_received`,
before any parsing), errors become outcomes with a short message, cancellation is recorded and re-raised.
The SSE events of a read are parsed inside the read's callback, so a stream costs one coroutine wake-up for
the whole response rather than one per read.

Timeouts: `timeout_s` counts from the send; `idle_timeout_s` is the longest time without a byte (the wait for
the response head included, as aiohttp's `sock_read`); connecting has 10 s. One timer per request, re-armed
only when it fires (a read only stores its time), so the per-read cost of the idle timeout is nil.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

import orjson

from loadgen import __version__
from loadgen.api import PATHS, ProtocolError, StreamState
from loadgen.client import SNIPPET, ClientConfig, _finish
from loadgen.h1 import CLOSE, CONTINUE, DONE, Connection, Pool
from loadgen.record import Record
from loadgen.sse import SseParser

CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_MAX = 4096
monotonic_ns = time.monotonic_ns


class StreamHandler:
    """Receives one response from `loadgen.h1.Connection` and fills the record as events arrive."""

    __slots__ = ("rec", "state", "parser", "chunk_tokens", "last_token_ns", "fut", "status", "error_body")

    def __init__(self, rec: Record, api: str, fut: asyncio.Future):
        self.rec = rec
        self.state = StreamState(api=api)
        self.parser = SseParser()
        self.chunk_tokens: list[int] | None = []
        self.last_token_ns = 0
        self.fut = fut
        self.status = 0
        self.error_body = b""

    def resolve(self, result: tuple[str, str] | None, now: int) -> None:
        """The answer is complete (None: judge it by the stream state) or failed with (outcome, error)."""
        if not self.fut.done():
            self.rec.t_end_ns = now
            self.fut.set_result(result)

    def head(self, status: int, headers: dict, now: int) -> None:
        self.status = status
        self.rec.status = status

    def body(self, data: bytes, now: int) -> int:
        rec = self.rec
        if rec.t_first_byte_ns is None:
            rec.t_first_byte_ns = now
        if self.status != 200:
            self.error_body += data
            if len(self.error_body) < ERROR_BODY_MAX:
                return CONTINUE
            self._http_error(now)
            return CLOSE
        state, feed, gap = self.state, self.state.feed, rec.chunk_gaps_ns.append
        chunk_tokens, last, chunks, result = self.chunk_tokens, self.last_token_ns, 0, CONTINUE
        try:
            for event in self.parser.feed(data):
                if feed(event):
                    if last:
                        gap(now - last)
                    else:
                        rec.t_first_token_ns = now
                    last = now
                    chunks += 1
                    if chunk_tokens is not None:
                        n = state.new_tokens
                        if n is None:
                            chunk_tokens = self.chunk_tokens = None
                        else:
                            chunk_tokens.append(n)
                    continue
                # events without content: count-only ones belong to the last chunk; [DONE] and errors end it
                if state.new_tokens and chunk_tokens:
                    chunk_tokens[-1] += state.new_tokens
                if state.done or state.error:
                    result = DONE if state.done else CLOSE
                    break
        except ProtocolError as exc:
            self.last_token_ns, rec.chunks = last, rec.chunks + chunks
            self.resolve(("protocol_error", str(exc)[:SNIPPET]), now)
            return CLOSE
        self.last_token_ns, rec.chunks = last, rec.chunks + chunks
        if result != CONTINUE:
            self.resolve(None, now)
        return result

    def end(self, now: int) -> None:
        if self.status != 200:
            self._http_error(now)
        else:
            self.resolve(None, now)

    def fail(self, kind: str, message: str, now: int) -> None:
        self.resolve((kind, message[:SNIPPET]), now)

    def _http_error(self, now: int) -> None:
        text = self.error_body[:ERROR_BODY_MAX].decode("utf-8", "replace")
        self.resolve(("http_error", f"HTTP {self.status}: {text[:SNIPPET]}"), now)


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
        self.handler.resolve(("timeout", f"{which} timeout ({limit_s:g} s) after {self.handler.rec.chunks} "
                                         "chunks"), now)

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
        cfg = self.cfg
        payload = orjson.dumps(body)
        rid = b"X-Request-Id: %s\r\n" % rec.request_id.encode() if rec.request_id else b""
        request = b"%s%sContent-Length: %d\r\n\r\n%s" % (self.prefix, rid, len(payload), payload)
        loop = asyncio.get_running_loop()
        handler = StreamHandler(rec, cfg.api, loop.create_future())
        rec.t_sent_ns = monotonic_ns()
        try:
            conn = await self.pool.acquire()
        except asyncio.CancelledError:
            _done(rec, handler, "cancelled", "cancelled before the response ended")
            raise
        except TimeoutError:
            limit = self.pool.connect_timeout_s
            _done(rec, handler, "timeout", f"connect timeout ({limit:g} s) after 0 chunks")
            return rec
        except OSError as exc:
            _done(rec, handler, "connection_error", f"{type(exc).__name__}: {exc}"[:SNIPPET])
            return rec
        rec.t_sent_ns = conn.start(request, handler)
        watchdog = Watchdog(loop, conn, handler, rec.t_sent_ns, cfg)
        try:
            result = await handler.fut
        except asyncio.CancelledError:
            conn.abort()
            _done(rec, handler, "cancelled", "cancelled before the response ended")
            raise
        finally:
            watchdog.cancel()
        if result is None:
            _done(rec, handler, None, None)
        else:
            _done(rec, handler, *result)
        return rec


def _done(rec: Record, handler: StreamHandler, outcome: str | None, error: str | None) -> None:
    _finish(rec, handler.state, handler.chunk_tokens, handler.last_token_ns, outcome, error)


def settle_gc() -> None:
    """Collect now and freeze what survives (modules, prompts, setup), before a cell's load.

    Otherwise a full collection over those objects (20 ms and more) falls on the cell's first wave: the
    requests behind it are sent late and the loop-lag monitor sees a stall the load never caused. Frozen
    objects are still freed by reference counting; only cycles among them would wait."""
    gc.collect()
    gc.freeze()


# ---- plug-in: --http-client -----------------------------------------------------------------------------

HTTP_CLIENTS = ("h1", "aiohttp")


def add_options(p: argparse.ArgumentParser) -> None:
    g = next((g for g in p._action_groups if g.title == "client"), None) or p.add_argument_group("client")
    g.add_argument("--http-client", choices=HTTP_CLIENTS, default="h1",
                   help="HTTP client of the measured streaming request: h1 (default; lean HTTP/1.1 on "
                        "asyncio "
                        "protocols, see docs/performance.md) or aiohttp")


def configure(a: argparse.Namespace, cfg) -> None:
    cfg.extras["http_client"] = getattr(a, "http_client", "h1")


def install(runner) -> None:
    """Measured requests go through one lean pool per run, warmed to the cell's concurrency before its
    load."""
    if runner.cfg.extras.get("http_client", "h1") != "h1" or not hasattr(runner, "sender") \
            or not hasattr(runner, "warm"):
        return
    pools: list[Pool] = []

    def pool() -> Pool:
        if not pools:
            pools.append(Pool(runner.url, connect_timeout_s=CONNECT_TIMEOUT_S))
        return pools[0]

    def sender(session, ccfg: ClientConfig):
        return Sender(pool(), ccfg, runner.headers)

    drive, run = runner.drive, runner.run

    async def warm_drive(cell_run, cell) -> None:
        await pool().warm(min(cell.concurrency or 1, 1024))
        await drive(cell_run, cell)

    async def run_and_close() -> int:
        try:
            return await run()
        finally:
            if pools:
                pools[0].close()

    async def settle(session, cell, n_jobs) -> None:
        # Measured requests do not use aiohttp's pool (ours is warmed in `warm_drive`, right before the load);
        # what this step does instead is settle the garbage collector before the cell's clocks start.
        settle_gc()

    runner.sender, runner.drive, runner.run, runner.warm = sender, warm_drive, run_and_close, settle


def _register() -> None:
    from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
    OPTION_GROUPS.append(add_options)
    CONFIGURERS.append(configure)
    RUNNER_HOOKS.append(install)


_register()
