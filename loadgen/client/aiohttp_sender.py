"""Streaming HTTP client over aiohttp (`--http-client aiohttp`): one call sends one request and returns its
`Record`, whatever happens.

Timestamps are `time.monotonic_ns()` taken right after each read returns, i.e. when the bytes arrive; the
record is filled by the shared `loadgen.client.recorder.StreamRecorder`. Errors become values in the record
(outcome + a short message), never exceptions, except cancellation, which is recorded and then re-raised so
the caller's task really stops.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from loadgen.client.api import PATHS, ProtocolError
from loadgen.client.config import CONNECT_TIMEOUT_S, ClientConfig, timeout_error
from loadgen.client.recorder import CANCELLED, ERROR_BODY_MAX, StreamRecorder, http_error, one_line
from loadgen.record import Record


async def _stamp_sent(session, ctx, params) -> None:
    rec = ctx.trace_request_ctx
    if isinstance(rec, Record):
        rec.t_sent_ns = time.monotonic_ns()


def make_session(cfg: ClientConfig) -> aiohttp.ClientSession:
    """One session per run; the pool has no cap (aiohttp's default limit is 100; the load sets the number of
    connections).

    `t_sent_ns` is re-stamped when the request body has been handed to the socket: in a burst of C sends
    the client's own serialisation is queueing (t_sent − t_intended), not server latency."""
    tracing = aiohttp.TraceConfig()
    tracing.on_request_chunk_sent.append(_stamp_sent)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=False, enable_cleanup_closed=True)
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
    )


async def send(session: aiohttp.ClientSession, cfg: ClientConfig, body: dict, rec: Record) -> Record:
    """Send `body`, stream the answer into `rec` (which carries run/cell/seq/intended time)."""
    recorder = StreamRecorder(rec, cfg.api)
    payload = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    if rec.request_id:
        headers["X-Request-Id"] = rec.request_id
    rec.t_sent_ns = time.monotonic_ns()
    try:
        async with session.post(cfg.base_url + PATHS[cfg.api], data=payload, headers=headers,
                                trace_request_ctx=rec) as resp:
            ended = await _read(resp, recorder)
    except asyncio.CancelledError:
        recorder.finish("cancelled", CANCELLED)
        raise
    except (ProtocolError, aiohttp.ClientResponseError) as exc:
        # ClientResponseError here: the answer was not valid HTTP (bad status line or headers)
        return recorder.finish("protocol_error", one_line(str(exc)))
    except TimeoutError as exc:
        return recorder.finish("timeout", _timeout_error(exc, cfg, rec.chunks))
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, OSError) as exc:
        return recorder.finish("connection_error", one_line(f"{type(exc).__name__}: {exc}"))
    return recorder.finish(*ended)


async def _read(resp: aiohttp.ClientResponse, recorder: StreamRecorder) -> tuple[str | None, str | None]:
    """Read the answer into the recorder until it is complete or the body ends; `t_end_ns` is then.
    Returns what `finish` is to be told: (None, None) to judge the stream, or ("http_error", message)."""
    rec = recorder.rec
    rec.status = resp.status
    if resp.status != 200:
        text = await resp.content.read(ERROR_BODY_MAX)
        rec.t_end_ns = time.monotonic_ns()
        return "http_error", http_error(resp.status, text)
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
