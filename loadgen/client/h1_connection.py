"""One keep-alive HTTP/1.1 connection as an asyncio protocol: writes a request, decodes its response inside
`data_received` and hands it to the request's handler (see `loadgen.client.h1` for why and for the scope).

A handler gets `head(status, headers, now_ns)`, which returns the body's reader: `body(data, now_ns)` is
called with each read's decoded bytes and returns CONTINUE, DONE (it has its answer: the rest of the body is
drained and the connection reused) or CLOSE (drop the connection). Then at most one of `end(now_ns)` (the
body is complete, or the reader said DONE or CLOSE) or `fail(kind, message, now_ns)`: kind
"connection_error" when the connection broke, "protocol_error" when the peer spoke no HTTP/1.1 or the reader
raised `ValueError` (bytes it cannot read). `now_ns` is `time.monotonic_ns()` when the read's bytes
arrived, before any parsing. The reader is called directly, one call per read: it is the client's hot path.
A handler's `chunk_reader` (optional) reads a chunked body's whole chunks itself: while its `whole_chunks` is set,
it has each chunk as it is decoded, and `read_chunks(data, pos, now)` is offered the read from each chunk's start
on (it returns where the first chunk it did not read starts); at HOLD_PARTIAL, a chunk that a read ends inside is
held and offered whole with the next read's bytes. Size exception: _chunked, one loop over a read (the hot path).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loadgen.client.h1_parse import (
    CHUNK_SIZES,
    HttpFormatError,
    chunk_rest,
    head_end,
    holdable,
    read_head,
    remember_chunk_size,
    size_line_start,
    trailer_end,
)
from loadgen.names import Outcome

HEAD, BODY, TRAILER, DRAIN, IDLE = range(5)
CONTINUE, DONE, CLOSE = 0, 1, 2  # what a handler's body() asks for
GIVE_EACH, HOLD_PARTIAL = 1, 2  # a `chunk_reader`'s `whole_chunks`; 0: it reads none
MAX_DRAIN = 1 << 20  # a body that goes on after the handler is done is cut after 1 MiB
KEEP_ALIVE_SHARE = 0.8  # reuse a connection for at most this share of the server's Keep-Alive timeout
monotonic_ns = time.monotonic_ns


class Connection(asyncio.Protocol):
    """One keep-alive connection of a pool; at most one response in progress.

    The pool is told `_put(conn)` when a response ended and the connection can be reused, `_forget(conn)`
    when it is lost. `served` counts the responses it completed (a request on a connection with `served` > 0
    went out on a reused connection); `reuse_idle_s` is how long it may stay idle, from the server's
    `Keep-Alive: timeout`; `fd` is its socket's descriptor (the pool polls it before reuse)."""

    __slots__ = ("pool", "transport", "state", "handler", "body", "chunks", "buf", "chunk_left", "body_left", "mode",
                 "keep_alive", "lost", "last_rx_ns", "drained", "idle_since", "served", "reuse_idle_s", "fd")

    def __init__(self, pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        self.handler: Any = None  # the request's handler: head, end, fail (h1.py, h1_sender.py)
        self.body: Any = None  # the handler's reader of the body in progress
        self.chunks: Any = None  # its reader of whole chunks, if it has one (`chunk_reader`)
        self.buf = b""
        self.chunk_left = -1  # chunked: bytes left of a chunk begun in an earlier read, its CRLF included; -1: none
        self.body_left = 0  # content-length: bytes left
        self.mode = ""  # "chunked" | "length" | "close"
        self.keep_alive = True
        self.lost = False
        self.last_rx_ns = 0
        self.drained = 0
        self.idle_since = 0.0
        self.served = 0
        self.reuse_idle_s = pool.reuse_idle_s
        self.fd = -1

    # ---- asyncio callbacks ------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

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
        handler.fail(Outcome.CONNECTION_ERROR, f"{reason} ({where})", now)

    def data_received(self, data: bytes) -> None:
        now = monotonic_ns()
        self.last_rx_ns = now
        try:
            if self.state == BODY and self.mode == "chunked":
                self._chunked(data, now)
            else:
                self._feed(data, now)
        except ValueError as exc:  # HttpFormatError, or the body's reader could not read its bytes
            self._fail_format(str(exc), now)

    # ---- requests -----------------------------------------------------------------------------------
    def start(self, request: bytes, handler) -> int:
        """Write `request`; the response goes to `handler`. Returns the time the bytes were handed over.
        `last_rx_ns` restarts at 0: it stays 0 until this request's first response byte."""
        self.buf = b""
        self.drained = 0
        self.last_rx_ns = 0
        transport = self.transport
        assert transport is not None, "the pool hands out connected connections only"
        if self.lost or transport.is_closing():  # a write would be dropped and nobody would answer
            now = monotonic_ns()
            handler.fail(Outcome.CONNECTION_ERROR, "server closed the connection (before the request was sent)", now)
            return now
        self.handler = handler
        self.state = HEAD
        transport.write(request)
        return monotonic_ns()

    def abort(self) -> None:
        """Drop the response in progress (cancelled, timed out): the connection cannot be reused."""
        self.handler = None
        self.state = IDLE
        if self.transport is not None:
            self.transport.abort()

    # ---- parsing -------------------------------------------------------------------------------------
    def _feed(self, data: bytes, now: int) -> None:
        """A read outside a chunked body: the head, a Content-Length or close-delimited body, the trailer."""
        if self.state == HEAD:
            data = self._head(data, now)
            if not data:
                return
        state = self.state
        if state in (BODY, DRAIN):
            if self.mode == "chunked":
                self._chunked(data, now)
            elif self.mode == "length":
                left = self.body_left
                take = data[:left] if len(data) > left else data
                self.body_left = left - len(take)
                self._deliver(take, now)
                if self.body_left == 0 and self.state in (BODY, DRAIN):
                    self._body_done(now, past=len(data) > left)
            else:
                self._deliver(data, now)
        elif state == TRAILER:
            self._trailer(data, now)
        elif state == IDLE:
            self.abort()  # bytes nobody asked for: a server talking out of turn is not reused

    def _head(self, data: bytes, now: int) -> bytes:
        """Read the response head (1xx answers skipped); returns the bytes after it when its body is to be read."""
        start = max(len(self.buf) - 3, 0)  # the blank line may have begun in the bytes held from earlier reads
        buf = self.buf + data if self.buf else data
        end = head_end(buf, start)
        if end < 0:
            self.buf = buf
            return b""
        status, headers, self.mode, self.body_left, self.keep_alive, idle_s = read_head(buf[:end])
        rest, self.buf = buf[end + 4:], b""
        if 100 <= status < 200:
            return self._head(rest, now) if rest else b""
        if idle_s is not None:
            self.reuse_idle_s = min(self.pool.reuse_idle_s, idle_s * KEEP_ALIVE_SHARE)
        self.chunk_left = -1
        self.state = BODY
        self.body = self.handler.head(status, headers, now)
        self.chunks = getattr(self.handler, "chunk_reader", None)
        if self.handler is None or self.state not in (BODY, DRAIN):
            return b""
        if self.mode == "length" and self.body_left == 0:
            self._body_done(now, past=bool(rest))
            return b""
        return rest

    def _chunked(self, data: bytes, now: int) -> None:  # noqa: C901 (one loop over a read, inline: the hot path)
        """Decode chunked framing: a read's chunk data goes to the handler at once (or to its `chunk_reader`). A size
        not matching its data is an error, not a guess; the chunks whole before it go to the handler first."""
        if self.buf:
            data, self.buf = self.buf + data, b""
        run = self.chunks if self.state == BODY else None
        offered = -1  # where the reader was offered the read and read nothing more: the decoder reads that chunk
        if run is not None and run.whole_chunks and self.chunk_left < 0:  # most reads: no decoder set up for them
            offered = run.read_chunks(data, 0, now)
            if offered >= len(data):
                return
        pieces: list[bytes] = []
        pos, n, find, sizes = max(offered, 0), len(data), data.find, CHUNK_SIZES
        try:
            if self.chunk_left >= 0:
                pos, self.chunk_left = chunk_rest(data, self.chunk_left, pieces)
            while pos < n:
                if run is not None and run.whole_chunks and pos != offered:  # it has each chunk, then reads on
                    if pieces:
                        self._flush(pieces, now)
                        if self.state != BODY:
                            if self.state != DRAIN:
                                return
                            run = None
                            continue
                    pos = run.read_chunks(data, pos, now)
                    if pos >= n:
                        return
                nl = find(b"\r\n", pos)
                if nl < 0:
                    self.buf = size_line_start(data[pos:])
                    break
                line = data[pos:nl]
                try:
                    size = sizes[line]  # a size line read before; a new one is checked (hex digits only, …)
                except KeyError:
                    size = remember_chunk_size(line)
                pos = nl + 2
                if size == 0:
                    self._last_chunk(data[pos:], pieces, now)
                    return
                end = pos + size
                if end + 2 > n:  # the chunk goes on in the next read
                    if end == n - 1 and data[end] != 13:
                        raise HttpFormatError("chunk data not followed by CRLF")
                    if run is not None and run.whole_chunks == HOLD_PARTIAL and holdable(data, pos, size):
                        self.buf = data[nl - len(line):]  # the reader reads it whole, with the next read's bytes
                        break
                    pieces.append(data[pos:end])
                    self.chunk_left = end + 2 - n
                    break
                if data[end] != 13 or data[end + 1] != 10:  # CRLF; two indexings cost less than a method call
                    raise HttpFormatError("chunk data not followed by CRLF")
                pieces.append(data[pos:end])
                pos = end + 2
        except HttpFormatError:
            if pieces and self.state == BODY:
                self._flush(pieces, now)
            raise
        if pieces:
            self._flush(pieces, now)

    def _flush(self, pieces: list[bytes], now: int) -> None:
        """The decoded `pieces` go to the handler (and are gone from the list, whatever its reader says)."""
        batch = b"".join(pieces)  # one piece: join gives that piece itself, no copy
        pieces.clear()
        self._deliver(batch, now)

    def _last_chunk(self, rest: bytes, pieces: list[bytes], now: int) -> None:
        """The zero-size chunk: what the read held before it goes to the handler, then the trailer is read."""
        if pieces:
            self._flush(pieces, now)
        if self.state in (BODY, DRAIN):
            self.state = TRAILER
            self._trailer(rest, now)

    def _trailer(self, data: bytes, now: int) -> None:
        """The trailer section after the last chunk: field lines (checked, not kept), then a blank line."""
        buf = self.buf + data if self.buf else data
        end = trailer_end(buf)
        self.buf = buf if end < 0 else b""
        if end >= 0:
            self._body_done(now, past=len(buf) > end)

    def _deliver(self, payload: bytes, now: int) -> None:
        if self.state == BODY:
            said = self.body(payload, now)
            if said:
                handler = self.handler
                if said == CLOSE:
                    self.abort()
                else:  # the handler has its answer ([DONE]); decode to the body's end, then reuse the connection
                    self.handler, self.state = None, DRAIN
                handler.end(now)
        elif self.state == DRAIN:
            self.drained += len(payload)
            if self.drained > MAX_DRAIN:
                self.abort()

    def _body_done(self, now: int, past: bool = False) -> None:
        """The body is complete. `past`: bytes came after it that nobody asked for (a second answer, a body
        longer than its Content-Length): the answer stands, the connection is closed, never reused."""
        if past:
            self.keep_alive = False
        handler = self.handler
        self.handler, self.state = None, IDLE
        if handler is not None:
            handler.end(now)
        self.served += 1
        if self.keep_alive and not self.lost:
            self.pool._put(self)
        else:
            self.abort()

    def _fail_format(self, message: str, now: int) -> None:
        handler = self.handler
        self.abort()
        if handler is not None:
            handler.fail(Outcome.PROTOCOL_ERROR, message, now)
