"""HTTP face of the simulator: SGLang's (or vLLM's) routes over the batching `Engine`.

The middleware stamps each request's arrival (see `arrival`), lets the fault hooks answer first, then checks
the API key on /v1/* and /generate. The routes themselves are in `info_routes`, `openai_routes` and
`generate_route`; `/metrics` is in `metrics`.
"""

from __future__ import annotations

import time

from aiohttp import web

from loadgen.sim.arrival import take_arrival
from loadgen.sim.config import SimConfig
from loadgen.sim.engine import Engine
from loadgen.sim.generate_route import GenerateRoute
from loadgen.sim.generation import Generations
from loadgen.sim.info_routes import InfoRoutes
from loadgen.sim.metrics import MetricsEndpoint, TtftHistogram
from loadgen.sim.openai_routes import OpenAIRoutes
from loadgen.sim.responses import error_response
from loadgen.sim.sglang_metrics import SglangCollector
from loadgen.sim.truth import TruthLog
from loadgen.sim.vllm_metrics import VllmCollector

MAX_BODY_BYTES = 64 * 2**20


class SimServer:
    def __init__(self, engine: Engine, cfg: SimConfig, truth: TruthLog, hooks=None):
        self.engine = engine
        self.cfg = cfg
        self.hooks = hooks
        ttft = TtftHistogram()
        self.metrics = MetricsEndpoint(_collector(engine, cfg, ttft))
        generations = Generations(engine, cfg.context_length, truth, ttft, hooks)
        vllm = cfg.engine_name == "vllm"
        self.routes = [InfoRoutes(engine, cfg, started_at_s=time.time()),
                       OpenAIRoutes(generations, cfg.model, spec_details=not vllm), GenerateRoute(generations)]

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/metrics", self.metrics.handle)
        for routes in self.routes:
            routes.add_routes(app.router)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        request["t_arrival_ns"] = take_arrival(request)
        if self.hooks is not None:
            early = await self.hooks.before(request)
            if early is not None:
                return early
        protected = request.path.startswith("/v1/") or request.path == "/generate"
        if self.cfg.api_key and protected and request.headers.get("Authorization") != f"Bearer {self.cfg.api_key}":
            return error_response("Invalid API key", 401)
        return await handler(request)


def _collector(engine: Engine, cfg: SimConfig, ttft: TtftHistogram):
    if cfg.engine_name == "vllm":
        return VllmCollector(engine, cfg.model, ttft)
    return SglangCollector(engine, cfg.model, ttft)
