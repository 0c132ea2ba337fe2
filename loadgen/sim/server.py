"""HTTP face of the simulator: SGLang's (or vLLM's) routes over the batching `Engine`.

The middleware stamps each request's arrival (see `arrival`), lets the fault hooks answer first, then checks
the API key on /v1/* and /generate. The routes themselves are in `info_routes`, `openai_routes` and
`generate_route`; `/metrics` is in `metrics`.
"""

from __future__ import annotations

import time
from typing import Protocol

from aiohttp import web

from loadgen.names import Engine as EngineName
from loadgen.sim.arrival import take_arrival
from loadgen.sim.config import SimConfig
from loadgen.sim.engine import Engine
from loadgen.sim.generate_route import GenerateRoute
from loadgen.sim.generation import Generations
from loadgen.sim.info_routes import InfoRoutes
from loadgen.sim.llamacpp import llamacpp_parts
from loadgen.sim.metrics import MetricsEndpoint
from loadgen.sim.openai_routes import OpenAIRoutes
from loadgen.sim.prefix_cache import PageCache
from loadgen.sim.responses import error_response
from loadgen.sim.server_latency import ServerLatency
from loadgen.sim.sglang_metrics import SglangCollector
from loadgen.sim.truth import TruthLog
from loadgen.sim.vllm_metrics import VllmCollector

MAX_BODY_BYTES = 64 * 2**20


class RouteTable(Protocol):
    """A group of the simulator's routes (OpenAI, /generate, info, llama.cpp's own)."""

    def add_routes(self, router: web.UrlDispatcher) -> None: ...


class SimServer:
    def __init__(self, engine: Engine, cfg: SimConfig, truth: TruthLog, hooks=None, closer=None):
        self.engine = engine
        self.cfg = cfg
        self.hooks = hooks
        self.closer = closer  # ConnectionCloser (sim/connections.py): connections closed under the client
        self.in_flight = 0
        self.last_request_end_s = time.monotonic()
        latency = ServerLatency()
        ttft = latency.ttft
        generations = Generations(engine, cfg.context_length, truth, ttft, hooks, latency=latency,
                                  prefix_cache=PageCache() if cfg.cache_report else None)
        llama = llamacpp_parts(engine, cfg, generations) if cfg.engine_name is EngineName.LLAMACPP else None
        self.metrics = MetricsEndpoint(llama.collector if llama else _collector(engine, cfg, latency))
        self.routes: list[RouteTable] = [*([llama.routes] if llama else []), InfoRoutes(engine, cfg, started_at_s=time.time()),
                       OpenAIRoutes(generations, cfg.model, spec_details=cfg.engine_name is EngineName.SGLANG,
                                    per_token_events=cfg.per_token_events, wire=llama.wire if llama else None,
                                    reasoning_tokens=cfg.reasoning_tokens),
                       GenerateRoute(generations)]

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/metrics", self.metrics.handle)
        for routes in self.routes:
            routes.add_routes(app.router)
        if self.closer is not None:
            app.on_response_prepare.append(self.closer.on_response_prepare)
        return app

    def idle_s(self) -> float:
        """Seconds since the last request ended, 0 while one is being served (`--exit-idle`)."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_request_end_s

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        self.in_flight += 1
        try:
            return await self._serve(request, handler)
        finally:
            self.in_flight -= 1
            self.last_request_end_s = time.monotonic()

    async def _serve(self, request: web.Request, handler):
        request["t_arrival_ns"] = take_arrival(request)
        if self.hooks is not None:
            early = await self.hooks.before(request)
            if early is not None:
                return early
        protected = request.path.startswith("/v1/") or request.path == "/generate"
        if self.cfg.api_key and protected and request.headers.get("Authorization") != f"Bearer {self.cfg.api_key}":
            return error_response("Invalid API key", 401)
        response = await handler(request)
        if self.closer is not None:
            self.closer.after_response(request, response)
        return response


def _collector(engine: Engine, cfg: SimConfig, latency: ServerLatency):
    match cfg.engine_name:
        case EngineName.VLLM:
            return VllmCollector(engine, cfg.model, latency.ttft)
        case _:
            return SglangCollector(engine, cfg.model, latency.ttft, latency=latency)
