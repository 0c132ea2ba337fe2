"""A lean HTTP/1.1 client for the measured streaming POST: asyncio protocols and a keep-alive pool.

Why not aiohttp for this one request: with aiohttp every TCP read wakes a coroutine (future → task step →
`readany`), and every request walks the session's middleware, tracing and connector layers. Under load that
is most of the client's CPU per chunk (benchmarks/RESULTS.md). Here the bytes are decoded and handed to the
response's handler inside `data_received`, when they arrive: no wake-up per read, one per response.

Scope: one origin per pool, HTTP/1.1 keep-alive, `Content-Length`, chunked and close-delimited bodies,
1xx skipped, TLS through asyncio's SSL transport. No proxies, redirects, compression or pipelining (the
measured POST needs none of them; everything else loadgen sends still goes through aiohttp).

A handler gets `head(status, headers, now_ns)`, then `body(data, now_ns)` for each read's decoded bytes,
returning CONTINUE, DONE (it has its answer: the rest of the body is drained and the connection reused) or
CLOSE (drop the connection); then at most one of `end(now_ns)` (body complete) or `fail(kind, message,
now_ns)` (kind "connection_error" when the connection broke, "protocol_error" when it spoke no HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import time
from urllib.parse import urlsplit

HEAD, BODY, TRAILER, DRAIN, IDLE = range(5)
CONTINUE, DONE, CLOSE = 0, 1, 2  # what a handler's body() asks for
MAX_HEAD = 64 * 1024
MAX_DRAIN = 1 << 20  # a body that goes on after the handler is done is cut after 1 MiB
REUSE_IDLE_S = 4.0  # uvicorn (SGLang, vLLM) closes keep-alive connections idle for 5 s: never race it
monotonic_ns = time.monotonic_ns


class HttpFormatError(Exception):
    """The peer sent something that is not HTTP/1.1."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head (without the final blank line)."""
    cut = head.find(b"\r\n")
    parts = (head if cut < 0 else head[:cut]).split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise HttpFormatError(f"not an HTTP/1.x status line: {head[:80]!r}")
    headers: dict[str, str] = {}
    if cut >= 0:
        for line in head[cut + 2:].decode("latin-1").split("\r\n"):
            name, sep, value = line.partition(":")
            if sep:
                key, value = name.strip().lower(), value.strip()
                headers[key] = headers[key] + ", " + value if key in headers else value
    if parts[0] == b"HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers.setdefault("connection", "close")
    return int(parts[1]), headers


class Connection(asyncio.Protocol):
    """One keep-alive connection; at most one response in progress."""

    __slots__ = ("pool", "transport", "state", "handler", "buf", "chunk_left", "body_left", "mode",
                 "keep_alive", "lost", "last_rx_ns", "paused", "drained", "idle_since")

    def __init__(self, pool: "Pool"):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        self.handler = None
        self.buf = b""
        self.chunk_left = 0  # chunked: bytes left in the current chunk (+2 for its CRLF); -1 = at a size line
        self.body_left = 0  # content-length: bytes left
        self.mode = ""  # "chunked" | "length" | "close"
        self.keep_alive = True
        self.lost = False
        self.last_rx_ns = 0
        self.paused = False
        self.drained = 0
        self.idle_since = 0.0

    # ---- asyncio callbacks ------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.lost = True
        self.pool._forget(self)
        state, handler = self.state, self.handler
        self.state, self.handler = IDLE, None
        if handler is None or state == DRAIN:
            return
        now = monotonic_ns()
        if (state == BODY and self.mode == "close") or state == TRAILER:
            handler.end(now)
            return
        where = "before the response head" if state == HEAD else "mid-body"
        reason = f"{type(exc).__name__}: {exc}" if exc else "server closed the connection"
        handler.fail("connection_error", f"{reason} ({where})", now)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        now = monotonic_ns()
        self.last_rx_ns = now
        try:
            if self.state == BODY and self.mode == "chunked":
                self._chunked(data, now)
            else:
                self._feed(data, now)
        except HttpFormatError as exc:
            self._fail_format(str(exc), now)

    # ---- requests -----------------------------------------------------------------------------------
    def start(self, request: bytes, handler) -> int:
        """Write `request`; the response goes to `handler`. Returns the time the bytes were handed over."""
        self.handler = handler
        self.state = HEAD
        self.buf = b""
        self.drained = 0
        self.transport.write(request)
        return monotonic_ns()

    def abort(self) -> None:
        """Drop the response in progress (cancelled, timed out): the connection cannot be reused."""
        self.handler = None
        self.state = IDLE
        if self.transport is not None:
            self.transport.abort()

    # ---- parsing -------------------------------------------------------------------------------------
    def _feed(self, data: bytes, now: int) -> None:
        if self.state == HEAD:
            buf = self.buf + data if self.buf else data
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise HttpFormatError("response head larger than 64 KiB")
                self.buf = buf
                return
            status, headers = parse_head(buf[:end])
            rest = buf[end + 4:]
            self.buf = b""
            if 100 <= status < 200:
                if rest:
                    self._feed(rest, now)
                return
            self._begin_body(status, headers, now)
            if self.handler is None or self.state not in (BODY, DRAIN):
                return
            if self.state == BODY and self.mode == "length" and self.body_left == 0:
                self._body_done(now)
                return
            data = rest
            if not data:
                return
        if self.state in (BODY, DRAIN):
            if self.mode == "chunked":
                self._chunked(data, now)
            elif self.mode == "length":
                take = data[:self.body_left]
                self.body_left -= len(take)
                self._deliver(take, now)
                if self.body_left == 0 and self.state in (BODY, DRAIN):
                    self._body_done(now)
            else:
                self._deliver(data, now)
        elif self.state == TRAILER:
            self._trailer(data, now)
        elif self.state == IDLE and data:
            self.abort()  # bytes nobody asked for: a server talking out of turn is not reused

    def _begin_body(self, status: int, headers: dict[str, str], now: int) -> None:
        conn = headers.get("connection", "").lower()
        self.keep_alive = "close" not in conn
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            self.mode, self.chunk_left = "chunked", -1
        elif "content-length" in headers:
            try:
                self.body_left = int(headers["content-length"])
            except ValueError:
                raise HttpFormatError(f"bad Content-Length {headers['content-length']!r}") from None
            self.mode = "length"
        else:
            self.mode, self.keep_alive = "close", False
        self.state = BODY
        self.handler.head(status, headers, now)

    def _chunked(self, data: bytes, now: int) -> None:
        """Decode chunked framing; every complete or partial chunk payload goes to the handler at once."""
        if self.buf:
            data = self.buf + data
            self.buf = b""
        pos, n = 0, len(data)
        pieces = []
        left = self.chunk_left
        find = data.find
        while pos < n:
            if left < 0:  # at a size line
                nl = find(b"\r\n", pos)
                if nl < 0:
                    if n - pos > 1024:
                        raise HttpFormatError("chunk size line too long")
                    self.buf = data[pos:]
                    break
                try:
                    size = int(data[pos:nl], 16)
                except ValueError:
                    size = _chunk_size(data[pos:nl])
                pos = nl + 2
                if size <= 0:
                    if size < 0:
                        raise HttpFormatError(f"negative chunk size {data[pos - 2 - 40:pos - 2]!r}")
                    self.chunk_left = -1
                    if pieces:
                        self._deliver(b"".join(pieces), now)
                        pieces = []
                    if self.state in (BODY, DRAIN):
                        self.state = TRAILER
                        self._trailer(data[pos:], now)
                    return
                end = pos + size
                if end + 2 <= n:  # the whole chunk is here: the common case
                    pieces.append(data[pos:end])
                    pos = end + 2
                    continue
                left = size + 2
            take = min(left, n - pos)
            if left > 2:
                pieces.append(data[pos:pos + min(take, left - 2)])
            left -= take
            pos += take
            if left == 0:
                left = -1
        self.chunk_left = left
        if pieces:
            self._deliver(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)

    def _trailer(self, data: bytes, now: int) -> None:
        buf = self.buf + data if self.buf else data
        if buf.startswith(b"\r\n"):
            rest = buf[2:]
        else:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                return
            rest = buf[end + 4:]
        self.buf = b""
        if rest:
            self.keep_alive = False  # pipelined bytes we never asked for
        self._body_done(now)

    def _deliver(self, payload: bytes, now: int) -> None:
        handler = self.handler
        if handler is not None and self.state == BODY:
            done = handler.body(payload, now)
            if done == CLOSE:
                self.abort()
            elif done:
                # the handler has its answer ([DONE]); decode to the body's end, then reuse the connection
                self.handler = None
                self.state = DRAIN
        elif self.state == DRAIN:
            self.drained += len(payload)
            if self.drained > MAX_DRAIN:
                self.abort()

    def _body_done(self, now: int) -> None:
        handler = self.handler
        self.handler, self.state = None, IDLE
        if handler is not None:
            handler.end(now)
        if self.keep_alive and not self.lost:
            self.pool._put(self)
        else:
            self.abort()

    def _fail_format(self, message: str, now: int) -> None:
        handler = self.handler
        self.abort()
        if handler is not None:
            handler.fail("protocol_error", message, now)


def _chunk_size(line: bytes) -> int:
    """Size of a chunk-size line with extensions (`1a;name=value`)."""
    try:
        return int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise HttpFormatError(f"bad chunk size line {line[:40]!r}") from None


class _Discard:
    """Handler that reads a response to its end and keeps nothing (connection warm-up)."""

    def __init__(self, fut: asyncio.Future):
        self.fut = fut

    def head(self, status: int, headers: dict, now: int) -> None:
        pass

    def body(self, data: bytes, now: int) -> int:
        return CONTINUE

    def end(self, now: int) -> None:
        if not self.fut.done():
            self.fut.set_result(True)

    def fail(self, kind: str, message: str, now: int) -> None:
        if not self.fut.done():
            self.fut.set_result(False)


class Pool:
    """Keep-alive connections to one origin; no cap (closed-loop concurrency is the cap)."""

    def __init__(self, base_url: str, connect_timeout_s: float = 10.0, ssl_context=None):
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
            if conn.lost or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > REUSE_IDLE_S:
                conn.abort()
                continue
            return conn
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
            if not conn.lost and now - conn.idle_since < REUSE_IDLE_S / 2:
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
