"""Streaming HTTP client over aiohttp (`--http-client aiohttp`): one call sends one request and returns its
`Record`, whatever happens.

Timestamps are `time.monotonic_ns()` taken right after each read returns, i.e. when the bytes arrive; the
record is filled by the shared `loadgen.client.recorder.StreamRecorder`. Errors become values in the record
(outcome + a short message), never exceptions, except cancellation, which is recorded and then re-raised so
the caller's task really stops.

A request that fails on a reused keep-alive connection before its response head (`ServerDisconnectedError`,
`ClientOSError` "Can not write request body": the server had closed the connection) is sent once more on a
new connection (a session whose connections are never reused), counted in `retried_on_new_connection`.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from loadgen.client.api import PATHS
from loadgen.client.config import CONNECT_TIMEOUT_S, ClientConfig, timeout_error
from loadgen.client.h1 import REUSE_IDLE_S
from loadgen.client.recorder import CANCELLED, ERROR_BODY_MAX, StreamRecorder, http_error, one_line
from loadgen.client.stream import ProtocolError
from loadgen.client.tls import ssl_context
from loadgen.names import Outcome
from loadgen.record import Record

# errors of a reused connection the server had closed; a failed connect (ClientConnectorError) is not one
RETRY_ON_NEW_CONNECTION = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
SIDE_ATTEMPTS = 3  # each failure drops one stale pooled connection: a few pooled ones can go stale at once


async def retry_closed_connection(req: aiohttp.ClientRequest, handler) -> aiohttp.ClientResponse:
    """Session middleware for every request of the run's session except the measured ones (they pass no
    middleware and retry once, counted, in `_post`): tokenize calls, probes, `/metrics`, `/v1/models`. One that
    failed on a connection the server had closed is sent again, up to `SIDE_ATTEMPTS` attempts in all, so a
    proxy's idle close never fails a cell before its load."""
    for _ in range(SIDE_ATTEMPTS - 1):
        try:
            return await handler(req)
        except RETRY_ON_NEW_CONNECTION as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):
                raise
    return await handler(req)


class Attempt:
    """One attempt of a request, as aiohttp's tracing sees it: its record and whether its connection was a
    reused one."""

    __slots__ = ("rec", "reused")

    def __init__(self, rec: Record):
        self.rec = rec
        self.reused = False


async def _stamp_sent(session, ctx, params) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, Attempt):
        attempt.rec.t_sent_ns = time.monotonic_ns()


async def _mark_reused(session, ctx, params) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, Attempt):
        attempt.reused = True


def make_session(cfg: ClientConfig, fresh_connections: bool = False) -> aiohttp.ClientSession:
    """One session per run; the pool has no cap (aiohttp's default limit is 100; the load sets the number of
    connections).

    `t_sent_ns` is re-stamped when the request body has been handed to the socket: in a burst of C sends
    the client's own serialisation is queueing (t_sent − t_intended), not server latency.

    `fresh_connections`: every request opens a new connection, closed after it (the session of retries).
    Idle connections are kept `REUSE_IDLE_S`, under the 5 s after which uvicorn (SGLang, vLLM) closes them."""
    tracing = aiohttp.TraceConfig()
    tracing.on_request_chunk_sent.append(_stamp_sent)
    tracing.on_connection_reuseconn.append(_mark_reused)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=fresh_connections,
                                     enable_cleanup_closed=True, ssl=ssl_context(cfg.base_url, cfg.tls) or True,
                                     keepalive_timeout=None if fresh_connections else REUSE_IDLE_S)
    timeout = aiohttp.ClientTimeout(total=cfg.timeout_s, sock_read=cfg.idle_timeout_s,
                                    sock_connect=CONNECT_TIMEOUT_S)
    return aiohttp.ClientSession(
        base_url=None,
        connector=connector,
        timeout=timeout,
        headers=cfg.headers or {},
        json_serialize=lambda o: orjson.dumps(o).decode(),
        read_bufsize=2**20,
        auto_decompress=False,
        trace_configs=[tracing],
        middlewares=(retry_closed_connection,),
    )


async def send(session: aiohttp.ClientSession, cfg: ClientConfig, body: dict, rec: Record,
               fresh: aiohttp.ClientSession | None = None) -> Record:
    """Send `body`, stream the answer into `rec` (which carries run/cell/seq/intended time). `fresh` (a
    `make_session(cfg, fresh_connections=True)`) carries the retry of a request whose reused connection the
    server had closed; without it the retry gets a session of its own, closed after the answer."""
    recorder = StreamRecorder(rec, cfg.api)
    payload = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    if rec.request_id:
        headers["X-Request-Id"] = rec.request_id
    rec.t_sent_ns = time.monotonic_ns()
    owned: list[aiohttp.ClientSession] = []
    try:
        resp = await _post(session, fresh, cfg, payload, headers, rec, owned)
        async with resp:
            ended = await _read(resp, recorder)
    except asyncio.CancelledError:
        recorder.finish(Outcome.CANCELLED, CANCELLED)
        raise
    except (ProtocolError, aiohttp.ClientResponseError) as exc:
        # ClientResponseError here: the answer was not valid HTTP (bad status line or headers)
        return recorder.finish(Outcome.PROTOCOL_ERROR, one_line(str(exc)))
    except TimeoutError as exc:
        return recorder.finish(Outcome.TIMEOUT, _timeout_error(exc, cfg, rec.chunks))
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, OSError) as exc:
        return recorder.finish(Outcome.CONNECTION_ERROR, one_line(f"{type(exc).__name__}: {exc}"))
    finally:
        for own in owned:
            await own.close()
    return recorder.finish(*ended)


async def _post(session: aiohttp.ClientSession, fresh: aiohttp.ClientSession | None, cfg: ClientConfig,
                payload: bytes, headers: dict, rec: Record, owned: list) -> aiohttp.ClientResponse:
    """The response head of the request, sent once more through `fresh` when it failed before its head on
    a reused connection (without `fresh`, through a session made for it and added to `owned`)."""
    url = cfg.base_url + PATHS[cfg.api]
    attempt = Attempt(rec)
    try:
        return await session.post(url, data=payload, headers=headers, trace_request_ctx=attempt, middlewares=())
    except RETRY_ON_NEW_CONNECTION as exc:
        if not attempt.reused or isinstance(exc, aiohttp.ClientConnectorError):
            raise
    rec.retried_on_new_connection += 1
    if fresh is None:
        fresh = make_session(cfg, fresh_connections=True)
        owned.append(fresh)
    return await fresh.post(url, data=payload, headers=headers, trace_request_ctx=Attempt(rec), middlewares=())


async def _read(resp: aiohttp.ClientResponse, recorder: StreamRecorder) -> tuple[Outcome | None, str | None]:
    """Read the answer into the recorder until it is complete or the body ends; `t_end_ns` is then.
    Returns what `finish` is to be told: (None, None) to judge the stream, or ("http_error", message)."""
    rec = recorder.rec
    rec.status = resp.status
    if resp.status != 200:
        text = await resp.content.read(ERROR_BODY_MAX)
        rec.t_end_ns = time.monotonic_ns()
        return Outcome.HTTP_ERROR, http_error(resp.status, text)
    readany, feed = resp.content.readany, recorder.feed
    while True:
        data = await readany()
        now = time.monotonic_ns()
        if not data or feed(data, now):
            break
    rec.t_end_ns = time.monotonic_ns()
    return None, None


def _timeout_error(exc: TimeoutError, cfg: ClientConfig, chunks: int) -> str:
    # aiohttp raises SocketTimeoutError for sock_read (no byte for idle_timeout_s), ConnectionTimeoutError
    # for sock_connect and a plain TimeoutError when the total budget is spent
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return timeout_error("connect", CONNECT_TIMEOUT_S, chunks)
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return timeout_error("idle", cfg.idle_timeout_s, chunks)
    return timeout_error("total", cfg.timeout_s, chunks)
