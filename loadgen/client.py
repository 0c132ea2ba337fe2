"""Streaming HTTP client: one call sends one request and returns its `Record`, whatever happens.

Timestamps are `time.monotonic_ns()` taken right after each read returns, i.e. when the bytes arrive.
Errors become values in the record (outcome + a short message), never exceptions, except cancellation,
which is recorded and then re-raised so the caller's task really stops.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
import orjson

from loadgen.api import PATHS, ProtocolError, StreamState
from loadgen.record import Record
from loadgen.sse import SseParser

SNIPPET = 200
CONNECT_TIMEOUT_S = 10.0


def one_line(text: str) -> str:
    """An error snippet for a record: one line, at most SNIPPET characters."""
    return " ".join(text.split())[:SNIPPET]


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    api: str
    timeout_s: float = 600.0
    idle_timeout_s: float = 120.0
    headers: dict | None = None


async def _stamp_sent(session, ctx, params) -> None:
    rec = ctx.trace_request_ctx
    if isinstance(rec, Record):
        rec.t_sent_ns = time.monotonic_ns()


def make_session(concurrency: int, cfg: ClientConfig) -> aiohttp.ClientSession:
    """One session per run; the pool never caps below the concurrency (aiohttp's default limit is 100).

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
    url = cfg.base_url + PATHS[cfg.api]
    state = StreamState(api=cfg.api)
    parser = SseParser()
    chunk_tokens: list[int] | None = []
    gaps = rec.chunk_gaps_ns
    last_token_ns = 0
    payload = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    if rec.request_id:
        headers["X-Request-Id"] = rec.request_id
    rec.t_sent_ns = time.monotonic_ns()
    try:
        async with session.post(url, data=payload, headers=headers, trace_request_ctx=rec) as resp:
            rec.status = resp.status
            if resp.status != 200:
                text = (await resp.content.read(4096)).decode("utf-8", "replace")
                rec.t_end_ns = time.monotonic_ns()
                rec.outcome = "http_error"
                rec.error = one_line(f"HTTP {resp.status}: {text}")
                return rec
            content = resp.content
            while not state.done:
                data = await content.readany()
                now = time.monotonic_ns()
                if not data:
                    break
                if rec.t_first_byte_ns is None:
                    rec.t_first_byte_ns = now
                for event in parser.feed(data):
                    state.feed(event)
                    if state.content:
                        n = state.new_tokens
                        if rec.t_first_token_ns is None:
                            rec.t_first_token_ns = now
                        else:
                            gaps.append(now - last_token_ns)
                        last_token_ns = now
                        if chunk_tokens is not None:
                            if n is None:
                                chunk_tokens = None
                            else:
                                chunk_tokens.append(n)
                        rec.chunks += 1
                    elif state.new_tokens and chunk_tokens:
                        # a count-only event (no text) still belongs to the last chunk
                        chunk_tokens[-1] += state.new_tokens
                    if state.done or state.error:
                        break
                if state.error:
                    break
            rec.t_end_ns = time.monotonic_ns()
    except asyncio.CancelledError:
        _finish(rec, state, chunk_tokens, last_token_ns, "cancelled", "cancelled before the response ended")
        raise
    except (ProtocolError, aiohttp.ClientResponseError) as exc:
        # ClientResponseError here: the answer was not valid HTTP (bad status line or headers)
        _finish(rec, state, chunk_tokens, last_token_ns, "protocol_error", one_line(str(exc)))
        return rec
    except TimeoutError as exc:
        # aiohttp raises SocketTimeoutError for sock_read (no byte for idle_timeout_s), ConnectionTimeoutError
        # for sock_connect and a plain TimeoutError when the total budget is spent
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            which, limit = "connect", CONNECT_TIMEOUT_S
        elif isinstance(exc, aiohttp.SocketTimeoutError):
            which, limit = "idle", cfg.idle_timeout_s
        else:
            which, limit = "total", cfg.timeout_s
        _finish(rec, state, chunk_tokens, last_token_ns, "timeout",
                f"{which} timeout ({limit:g} s) after {rec.chunks} chunks")
        return rec
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, OSError) as exc:
        _finish(rec, state, chunk_tokens, last_token_ns, "connection_error",
                one_line(f"{type(exc).__name__}: {exc}"))
        return rec
    _finish(rec, state, chunk_tokens, last_token_ns, None, None)
    return rec


def _finish(rec: Record, state: StreamState, chunk_tokens, last_token_ns: int, outcome, error) -> None:
    if not rec.t_end_ns:
        rec.t_end_ns = time.monotonic_ns()
    rec.t_last_token_ns = last_token_ns or None
    rec.prompt_tokens = state.prompt_tokens
    rec.completion_tokens = state.completion_tokens
    rec.spec = state.spec
    rec.chunk_tokens = chunk_tokens
    if outcome is None:
        reason = state.incomplete_reason()
        if reason is None:
            rec.outcome = "ok"
            if chunk_tokens is not None and sum(chunk_tokens) != state.completion_tokens:
                # running counts disagree with the final usage: the final total wins, per-chunk data is dropped
                rec.chunk_tokens = None
            return
        outcome = "protocol_error" if state.error is None else "http_error"
        error = reason
    rec.outcome = outcome
    rec.error = error
