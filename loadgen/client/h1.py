"""A lean HTTP/1.1 client for the measured streaming POST: asyncio protocols and a keep-alive pool.

Why not aiohttp for this one request: with aiohttp every TCP read wakes a coroutine (future → task step →
`readany`), and every request walks the session's middleware, tracing and connector layers. Under load that
is most of the client's CPU per chunk (benchmarks/RESULTS.md). Here the bytes are decoded and handed to the
response's handler inside `data_received`, when they arrive: no wake-up per read, one per response.

Scope: one origin per pool, HTTP/1.1 keep-alive, `Content-Length`, chunked and close-delimited bodies,
1xx skipped, TLS through asyncio's SSL transport. No proxies, redirects, compression or pipelining (the
measured POST needs none of them; everything else loadgen sends still goes through aiohttp).

Modules: `h1_parse` (response syntax, pure), `h1_connection` (one connection's protocol and the handler
interface), this one (the pool).
"""

from __future__ import annotations

import asyncio
import select
import ssl as ssl_module
import time
from urllib.parse import urlsplit

from loadgen.client.config import CONNECT_TIMEOUT_S
from loadgen.client.h1_connection import CONTINUE, Connection
from loadgen.names import Outcome

REUSE_IDLE_S = 4.0  # uvicorn (SGLang, vLLM) closes keep-alive connections idle for 5 s: never race it


class _Discard:
    """Handler that reads a response to its end and keeps nothing (connection warm-up)."""

    def __init__(self, fut: asyncio.Future):
        self.fut = fut

    def head(self, status: int, headers: dict, now: int):
        return self.body

    def body(self, data: bytes, now: int) -> int:
        return CONTINUE

    def end(self, now: int) -> None:
        if not self.fut.done():
            self.fut.set_result(True)

    def fail(self, kind: Outcome, message: str, now: int) -> None:
        if not self.fut.done():
            self.fut.set_result(False)


def readable(fd: int) -> bool:
    """Whether an idle connection's socket has something to read: the server's EOF, a reset, or bytes nobody
    asked for. The kernel knows before the event loop has run the protocol's callbacks: a server that closes
    right after a response (llama.cpp's llama-server does, while announcing keep-alive) is seen here."""
    if fd < 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def reusable(conn: Connection, now_s: float) -> bool:
    """An idle connection may carry the next request: not lost or closing, idle for less than its
    `reuse_idle_s` (the server's Keep-Alive timeout, or `REUSE_IDLE_S`), and nothing waiting on its socket."""
    if conn.lost or conn.transport is None or conn.transport.is_closing():
        return False
    return now_s - conn.idle_since < conn.reuse_idle_s and not readable(conn.fd)


class Pool:
    """Keep-alive connections to one origin; no cap (closed-loop concurrency is the cap).

    A pooled connection is handed out only when `reusable`; one the server closed is dropped, never reused.
    `connect()` always opens a new one (the sender's retry after a reused connection failed)."""

    def __init__(self, base_url: str, connect_timeout_s: float = CONNECT_TIMEOUT_S, ssl_context=None):
        u = urlsplit(base_url)
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.host_header = u.netloc.rsplit("@", 1)[-1]
        self.connect_timeout_s = connect_timeout_s
        self.ssl = (ssl_context or ssl_module.create_default_context()) if u.scheme == "https" else None
        self.idle: list[Connection] = []
        self.all: set[Connection] = set()
        self.closed = False
        self.reuse_idle_s = REUSE_IDLE_S

    def request_prefix(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        """The constant start of a request head: request line, Host and `headers` (each line ends in CRLF)."""
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}"]
        for name, value in headers.items():
            value = str(value)
            if any(c in name + value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} contains a line break")
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def acquire(self) -> Connection:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if reusable(conn, now):
                return conn
            conn.abort()
        return await self.connect()

    async def connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: Connection(self), self.host, self.port, ssl=self.ssl,
                                   server_hostname=self.host if self.ssl else None),
            self.connect_timeout_s)
        self.all.add(conn)
        return conn

    async def warm(self, n: int, path: str = "/v1/models") -> int:
        """Open up to `n` idle connections ahead of a cell, each proven by one `GET path` round trip.

        The round trip matters: a connection the server has not yet accepted and set up would charge that work
        to the first measured request (a burst of C sends would queue behind C accepts)."""
        # connections idle for long would be dropped (REUSE_IDLE_S) at the first measured request, which would
        # then pay for a new one: replace them now
        now = time.monotonic()
        keep = []
        for conn in self.idle:
            if reusable(conn, now + conn.reuse_idle_s / 2):
                keep.append(conn)
            else:
                conn.abort()
        self.idle = keep
        need = n - len(self.idle)
        if need <= 0:
            return 0
        request = self.request_prefix("GET", path, {"Accept": "*/*"}) + b"\r\n"
        opened = await asyncio.gather(*(self._warm_one(request) for _ in range(need)), return_exceptions=True)
        return sum(1 for ok in opened if ok is True)

    async def _warm_one(self, request: bytes) -> bool:
        conn = await self.connect()
        handler = _Discard(asyncio.get_running_loop().create_future())
        conn.start(request, handler)
        try:
            await asyncio.wait_for(handler.fut, self.connect_timeout_s)
        except TimeoutError:
            conn.abort()
            return False
        return handler.fut.result()  # the connection went back to the idle list when its body ended

    def _put(self, conn: Connection) -> None:
        if self.closed:
            conn.abort()
        else:
            conn.idle_since = time.monotonic()
            self.idle.append(conn)

    def _forget(self, conn: Connection) -> None:
        self.all.discard(conn)

    def close(self) -> None:
        self.closed = True
        for conn in list(self.all):
            if conn.transport is not None:
                conn.transport.close()
        self.idle.clear()

    async def __aenter__(self) -> "Pool":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
