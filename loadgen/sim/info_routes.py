"""The routes that generate no text: health, model and server info, tokenize, flush_cache, vLLM's /version.

`/health_generate` runs a one-token request through the engine (503 if none comes within 20 s), as SGLang's
does. A vLLM imitation answers `/version` and has no `/server_info`.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from aiohttp import web

from loadgen.names import Engine as EngineName
from loadgen.sim import tokenizer
from loadgen.sim.config import SimConfig
from loadgen.sim.engine import Engine, SimRequest
from loadgen.sim.responses import error_response, json_response, read_json_object

SGLANG_VERSION = "0.5.23-sim"
VLLM_VERSION = "0.11.0-sim"
HEALTH_GENERATE_TIMEOUT_S = 20


class InfoRoutes:
    def __init__(self, engine: Engine, cfg: SimConfig, started_at_s: float):
        self.engine = engine
        self.cfg = cfg
        self.started_at_s = started_at_s

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/health", self.health)
        router.add_get("/health_generate", self.health_generate)
        router.add_get("/v1/models", self.models)
        router.add_get("/server_info", self.get_server_info)
        router.add_get("/get_server_info", self.get_server_info)
        router.add_get("/model_info", self.model_info)
        if self.cfg.engine_name is EngineName.VLLM:
            router.add_get("/version", self.version)
        if self.cfg.engine_name is not EngineName.LLAMACPP:  # llama-server's own /tokenize is in sim/llamacpp.py
            router.add_post("/v1/tokenize", self.tokenize)
            router.add_post("/tokenize", self.tokenize)
        router.add_route("*", "/flush_cache", self.flush_cache)

    def server_info(self) -> dict:
        """SGLang's /server_info: the server args, and `internal_states` with the lifetime accept length
        Σgeneration_tokens / Σverify_calls (None before the first request completes)."""
        e, spec, model = self.engine, self.engine.spec, self.cfg.model
        lifetime = e.generation_tokens_total / e.spec_verify_calls_total if e.spec_verify_calls_total else None
        return {
            "model_path": model, "tokenizer_path": model, "served_model_name": model,
            "tp_size": 8, "dp_size": 1, "context_length": self.cfg.context_length,
            "max_running_requests": e.max_running, "stream_interval": 1,
            "decode_log_interval": e.decode_log_interval, "enable_metrics": True,
            "disable_cuda_graph": self.cfg.disable_cuda_graph,
            "speculative_algorithm": spec.algorithm, "speculative_draft_model_path": model + "-draft",
            "speculative_num_steps": 1, "speculative_eagle_topk": spec.topk,
            "speculative_num_draft_tokens": spec.budget + 1, "speculative_dflash_block_size": spec.block_size,
            "speculative_ddtree_budget": spec.budget, "sim_speed": e.speed, "sim_started_at": self.started_at_s,
            "internal_states": [{"avg_spec_accept_length": lifetime,
                                 "last_gen_throughput": e.gauge_gen_throughput}],
            "api_key": self.cfg.api_key,  # SGLang's /server_info carries every server arg, the key included
            "version": SGLANG_VERSION,
        }

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def health_generate(self, request: web.Request) -> web.Response:
        req = SimRequest(rid=f"HEALTH_CHECK_{uuid.uuid4().hex[:8]}", prompt_tokens=1, max_tokens=1,
                         t_arrival_ns=time.monotonic_ns())
        self.engine.submit(req)
        try:
            await asyncio.wait_for(req.queue.get(), timeout=HEALTH_GENERATE_TIMEOUT_S)
        except TimeoutError:
            self.engine.abort(req)
            return web.Response(status=503)
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        return json_response({"object": "list", "data": [{
            "id": self.cfg.model, "object": "model", "created": int(self.started_at_s), "owned_by": "sglang",
            "root": self.cfg.model, "parent": None, "max_model_len": self.cfg.context_length}]})

    async def get_server_info(self, request: web.Request) -> web.Response:
        if self.cfg.engine_name is not EngineName.SGLANG:
            raise web.HTTPNotFound()
        return json_response(self.server_info())

    async def model_info(self, request: web.Request) -> web.Response:
        return json_response({"model_path": self.cfg.model, "tokenizer_path": self.cfg.model,
                              "is_generation": True, "weight_version": "default"})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VLLM_VERSION})  # vLLM's spacing, not orjson's

    async def flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if isinstance(body, web.Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            per_prompt = [tokenizer.encode(str(p)) for p in prompt]
            return json_response({"tokens": per_prompt, "count": [len(t) for t in per_prompt],
                                  "max_model_len": self.cfg.context_length})
        if not isinstance(prompt, str):
            return error_response("'prompt' must be a string or a list of strings", 400)
        tokens = tokenizer.encode(prompt)
        return json_response({"tokens": tokens, "count": len(tokens), "max_model_len": self.cfg.context_length})
