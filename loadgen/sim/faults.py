"""Fault injection for the simulator: each failure loadgen must survive, on a flag.

`FaultHooks` plugs into `SimServer`: `before(request)` runs in the middleware for every route and may answer
in the route's place (a 5xx, a broken generation, a crash); `on_chunk(req, k, resp)` runs before each
streamed content chunk (a stall, a malformed chunk). Only generation routes (`/v1/chat/completions`,
`/v1/completions`, `/generate`, probes included) are counted and faulted; `/health_generate` follows the
broken-generation faults, since it is a generation too. Requests the hooks answer themselves still get a
ground-truth row (outcome `http_error` or `client_disconnected`), and every truth row names the faults
applied to its request (`faults`), so a test can match loadgen's records to the truth one by one.

Times are wall-clock seconds of this process (not divided by `--speed`): readiness timeouts are too.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson
from aiohttp import web

from loadgen.sim.responses import error_response

if TYPE_CHECKING:
    import argparse

GENERATION_PATHS = {"/v1/chat/completions": "openai-chat", "/v1/completions": "openai-completions",
                    "/generate": "sglang-generate"}
MALFORMED = b'data: {"choices": [{"delta": {"content": "x"\n\n'  # an event whose JSON is cut short
DISCONNECT_POLL_S = 0.05


@dataclass
class FaultConfig:
    crash_after: int | None = None  # die when generation request N+1 arrives (N are served)
    crash_above: int | None = None  # die when a request arrives while M are already running or waiting
    slow_start_s: float = 0.0  # generation broken for the first S seconds while /health answers 200
    loading_s: float = 0.0  # every route answers 503 "loading" for the first S seconds (weights loading)
    stale_health: bool = False  # generation broken for good while /health answers 200
    broken_mode: str = "fail"  # how broken generation looks: fail = 503 at once, hang = never answers
    stall_after: int | None = None  # stop sending after N tokens, connection kept open
    stall_every: int = 1  # only every K-th generation request stalls
    malformed_every: int | None = None  # every N-th content chunk, counted over the server, is not JSON
    http_error_rate: float = 0.0  # fraction of generation requests answered with a 5xx at once (seeded)
    http_error_status: int = 503
    seed: int = 0

    def any(self) -> bool:
        return any((self.crash_after is not None, self.crash_above is not None, self.slow_start_s > 0,
                    self.loading_s > 0,
                    self.stale_health, self.stall_after is not None, self.malformed_every is not None,
                    self.http_error_rate > 0))


@dataclass
class _Req:
    """What the hooks know of one request (lives in the handler task's context)."""

    request: web.Request
    index: int  # 1-based arrival number among generation requests
    faults: list[str] = field(default_factory=list)
    tokens_sent: int = 0


_current: contextvars.ContextVar[_Req | None] = contextvars.ContextVar("sim_fault_request", default=None)


class FaultHooks:
    def __init__(self, cfg: FaultConfig, engine, truth, error_response):
        self.cfg = cfg
        self.engine = engine
        self.truth = truth
        self.error_response = error_response
        self.t0 = time.monotonic()
        self.arrivals = 0
        self.chunks = 0
        self.rng = random.Random(f"faults:{cfg.seed}")

    # ---- middleware hook ---------------------------------------------------------------------------------
    async def before(self, request: web.Request) -> web.StreamResponse | None:
        api = GENERATION_PATHS.get(request.path) if request.method == "POST" else None
        if self.loading():
            return await self._loading_answer(request, api)
        if api is None:
            if request.path == "/health_generate" and self.broken():
                return await self._broken_answer(request, None)
            return None
        self.arrivals += 1
        ctx = _Req(request, self.arrivals)
        _current.set(ctx)
        cfg = self.cfg
        if cfg.crash_after is not None and self.arrivals > cfg.crash_after:
            crash(f"generation request {self.arrivals} arrived after {cfg.crash_after} (--crash-after)")
        if cfg.crash_above is not None:
            running = len(self.engine.running) + len(self.engine.waiting)
            if running + 1 > cfg.crash_above:
                crash(f"{running + 1} requests running or waiting, above {cfg.crash_above} (--crash-above)")
        if self.broken():
            ctx.faults.append("slow_start" if not cfg.stale_health else "stale_health")
            return await self._broken_answer(request, ctx)
        if cfg.http_error_rate > 0 and self.rng.random() < cfg.http_error_rate:
            ctx.faults.append("http_error")
            await self._truth_early(ctx, "http_error", cfg.http_error_status)
            return self.error_response(f"simulated server error (--http-error-rate {cfg.http_error_rate:g})",
                                       cfg.http_error_status)
        return None

    def loading(self) -> bool:
        return time.monotonic() - self.t0 < self.cfg.loading_s

    async def _loading_answer(self, request: web.Request, api: str | None) -> web.StreamResponse:
        """503 on every route, as a server answers while it loads its weights (llama.cpp: "Loading model")."""
        if api is not None:
            self.arrivals += 1
            ctx = _Req(request, self.arrivals, faults=["loading"])
            await self._truth_early(ctx, "http_error", 503)
        return self.error_response("Loading model (--loading)", 503)

    def broken(self) -> bool:
        return self.cfg.stale_health or time.monotonic() - self.t0 < self.cfg.slow_start_s

    async def _broken_answer(self, request: web.Request, ctx: _Req | None) -> web.StreamResponse:
        if self.cfg.broken_mode == "hang":
            await wait_disconnected(request)
            if ctx is not None:
                await self._truth_early(ctx, "client_disconnected", None)
            return web.Response(status=503)
        if ctx is not None:
            await self._truth_early(ctx, "http_error", 503)
        why = "generation is failing (--stale-health)" if self.cfg.stale_health else \
            "the model is still loading (--slow-start)"
        return self.error_response(f"The server is not ready: {why}", 503)

    async def _truth_early(self, ctx: _Req, outcome: str, status: int | None) -> None:
        """The truth row of a request answered here, in the route's place."""
        request = ctx.request
        try:
            body = orjson.loads(await request.read())
        except (orjson.JSONDecodeError, ConnectionError):
            body = {}
        body = body if isinstance(body, dict) else {}
        now = time.monotonic_ns()
        self.truth.write({
            "rid": request.headers.get("X-Request-Id") or f"early-{ctx.index}",
            "api": GENERATION_PATHS[request.path], "stream": bool(body.get("stream")),
            "t_arrival_ns": request.get("t_arrival_ns", now), "t_first_chunk_ns": None, "chunk_times_ns": [],
            "chunk_tokens": [], "prompt_tokens": None, "max_tokens": None, "t_end_ns": now, "verify_ct": 0,
            "completion_tokens": 0, "outcome": outcome, "status": status, "faults": ctx.faults})

    # ---- per-chunk hook ----------------------------------------------------------------------------------
    async def on_chunk(self, req, k: int, resp: web.StreamResponse | None = None) -> int:
        ctx = _current.get()
        cfg = self.cfg
        if ctx is not None and cfg.stall_after is not None and ctx.index % cfg.stall_every == 0 \
                and ctx.tokens_sent >= cfg.stall_after:
            ctx.faults.append("stall")
            await wait_disconnected(ctx.request)
            raise ConnectionResetError("client went away from a stalled stream")
        self.chunks += 1
        if cfg.malformed_every is not None and self.chunks % cfg.malformed_every == 0 and resp is not None:
            if ctx is not None:
                ctx.faults.append("malformed")
            await resp.write(MALFORMED)
        if ctx is not None:
            ctx.tokens_sent += k
        return k

    def truth_fields(self) -> dict:
        """Extra fields of the current request's truth row (the faults applied to it)."""
        ctx = _current.get()
        return {"faults": ctx.faults} if ctx is not None else {}


async def wait_disconnected(request: web.Request) -> None:
    """Block, sending nothing, until the client closes the connection (aiohttp does not cancel handlers)."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(DISCONNECT_POLL_S)


def crash(why: str) -> None:
    """Die at once, like a server killed by the OOM killer: no cleanup, sockets reset by the kernel."""
    sys.stderr.write(f"loadgen-sim: fault: crashing: {why}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


# ---- from parsed flags (the flags: loadgen/cli/sim_options.py) ---------------------------------------
def config_from_args(a: argparse.Namespace) -> FaultConfig:
    """The fault settings; a bad value ends the simulator with a one-line message (exit 2)."""
    def at_least(flag: str, value, low):
        if value is not None and value < low:
            usage_exit(f"{flag} {value:g} must be ≥ {low}")
        return value

    cfg = FaultConfig(
        crash_after=at_least("--crash-after", a.crash_after, 0),
        crash_above=at_least("--crash-above", a.crash_above, 1),
        slow_start_s=at_least("--slow-start", a.slow_start, 0),
        loading_s=at_least("--loading", a.loading, 0),
        stale_health=a.stale_health, broken_mode=a.broken_mode,
        stall_after=at_least("--stall-after", a.stall_after, 0),
        stall_every=at_least("--stall-every", a.stall_every, 1),
        malformed_every=at_least("--malformed-every", a.malformed_every, 1),
        http_error_rate=a.http_error_rate, http_error_status=a.http_error_status, seed=a.fault_seed)
    if not 0.0 <= cfg.http_error_rate <= 1.0:
        usage_exit(f"--http-error-rate {cfg.http_error_rate:g} must be between 0 and 1")
    if not 500 <= cfg.http_error_status <= 599:
        usage_exit(f"--http-error-status {cfg.http_error_status} must be a 5xx code, e.g. 503")
    return cfg


def usage_exit(message: str) -> None:
    print(f"loadgen sim: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def hooks_from_args(a: argparse.Namespace, engine, truth) -> FaultHooks | None:
    cfg = config_from_args(a)
    return FaultHooks(cfg, engine, truth, error_response) if cfg.any() else None
