"""HTTP face of the simulator: SGLang's routes and wire formats over the batching `Engine`."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

import orjson
from aiohttp import web

from loadgen.sim import tokenizer
from loadgen.sim.arrival import take_arrival
from loadgen.sim.engine import Engine, SimRequest
from loadgen.sim.metrics_text import render_metrics
from loadgen.sim.render import OpenAIChunks, generate_event, spec_details, sse, text_for
from loadgen.sim.truth import TruthLog

JSON = "application/json"


@dataclass
class SimConfig:
    model: str = "Kimi-K2.6-sim"
    context_length: int = 32768
    api_key: str | None = None
    engine_name: str = "sglang"


def json_response(obj, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON)


def error_response(message: str, status: int) -> web.Response:
    return json_response({"object": "error", "message": message, "type": "BadRequestError", "code": status},
                         status)


class SimServer:
    def __init__(self, engine: Engine, cfg: SimConfig, truth: TruthLog, hooks=None):
        self.engine = engine
        self.cfg = cfg
        self.truth = truth
        self.hooks = hooks
        self.started_at = time.time()

    def server_info(self) -> dict:
        spec = self.engine.spec
        lifetime = (self.engine.generation_tokens_total / self.engine.spec_verify_calls_total
                    if self.engine.spec_verify_calls_total else None)
        return {
            "model_path": self.cfg.model, "tokenizer_path": self.cfg.model, "served_model_name": self.cfg.model,
            "tp_size": 8, "dp_size": 1, "context_length": self.cfg.context_length,
            "max_running_requests": self.engine.max_running, "stream_interval": 1, "decode_log_interval":
            self.engine.decode_log_interval, "enable_metrics": True,
            "speculative_algorithm": spec.algorithm, "speculative_draft_model_path": self.cfg.model + "-draft",
            "speculative_num_steps": 1, "speculative_eagle_topk": spec.topk,
            "speculative_num_draft_tokens": spec.budget + 1, "speculative_dflash_block_size": spec.block_size,
            "speculative_ddtree_budget": spec.budget, "sim_speed": self.engine.speed,
            "sim_started_at": self.started_at,
            "internal_states": [{"avg_spec_accept_length": lifetime, "last_gen_throughput":
                                 self.engine.gauge_gen_throughput}],
            "api_key": self.cfg.api_key,  # SGLang's /server_info carries every server arg, the key included
            "version": "0.5.23-sim",
        }

    # ---- routes ----------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth], client_max_size=64 * 2**20)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health_generate)
        r.add_get("/v1/models", self.models)
        r.add_get("/server_info", self.get_server_info)
        r.add_get("/get_server_info", self.get_server_info)
        r.add_get("/model_info", self.model_info)
        r.add_get("/metrics", self.metrics)
        if self.cfg.engine_name == "vllm":
            from loadgen.sim.vllm_metrics import VllmCounters, add_vllm_routes
            self.vllm_counters = VllmCounters(self.engine)
            add_vllm_routes(r)
        r.add_post("/v1/tokenize", self.tokenize)
        r.add_post("/tokenize", self.tokenize)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/generate", self.generate)
        r.add_route("*", "/flush_cache", self.flush_cache)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler):
        request["t_arrival_ns"] = take_arrival(request)
        if self.hooks is not None:
            early = await self.hooks.before(request)
            if early is not None:
                return early
        protected = request.path.startswith("/v1/") or request.path == "/generate"
        if self.cfg.api_key and protected and request.headers.get("Authorization") != f"Bearer {self.cfg.api_key}":
            return error_response("Invalid API key", 401)
        return await handler(request)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def health_generate(self, request: web.Request) -> web.Response:
        req = SimRequest(rid=f"HEALTH_CHECK_{uuid.uuid4().hex[:8]}", prompt_tokens=1, max_tokens=1,
                         t_arrival_ns=time.monotonic_ns())
        self.engine.submit(req)
        try:
            await asyncio.wait_for(req.queue.get(), timeout=20)
        except TimeoutError:
            self.engine.abort(req)
            return web.Response(status=503)
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        return json_response({"object": "list", "data": [{
            "id": self.cfg.model, "object": "model", "created": int(self.started_at), "owned_by": "sglang",
            "root": self.cfg.model, "parent": None, "max_model_len": self.cfg.context_length}]})

    async def get_server_info(self, request: web.Request) -> web.Response:
        if self.cfg.engine_name == "vllm":  # vLLM has /version instead
            raise web.HTTPNotFound()
        return json_response(self.server_info())

    async def model_info(self, request: web.Request) -> web.Response:
        return json_response({"model_path": self.cfg.model, "tokenizer_path": self.cfg.model,
                              "is_generation": True, "weight_version": "default"})

    async def metrics(self, request: web.Request) -> web.Response:
        if self.cfg.engine_name == "vllm":
            from loadgen.sim.vllm_metrics import render_vllm_metrics
            return web.Response(text=render_vllm_metrics(self.engine, self.vllm_counters, self.cfg.model),
                                content_type="text/plain")
        return web.Response(text=render_metrics(self.engine, self.cfg.model, self.cfg.engine_name),
                            content_type="text/plain")

    async def flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            tokens = [tokenizer.encode(str(p)) for p in prompt]
            return json_response({"tokens": tokens, "count": [len(t) for t in tokens],
                                  "max_model_len": self.cfg.context_length})
        if not isinstance(prompt, str):
            return error_response("'prompt' must be a string or a list of strings", 400)
        tokens = tokenizer.encode(prompt)
        return json_response({"tokens": tokens, "count": len(tokens), "max_model_len": self.cfg.context_length})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=False)

    async def _openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        t_arrival = request["t_arrival_ns"]
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        model = body.get("model")
        if model is not None and model != self.cfg.model:
            return error_response(f"The model `{model}` does not exist.", 404)
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return error_response("'messages' must be a non-empty list", 400)
            size = sum(len(str(m.get("content") or "")) for m in messages) + 64
            count = lambda: tokenizer.chat_prompt_tokens(messages)  # noqa: E731
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return error_response("'prompt' must be a string", 400)
            size = len(prompt)
            count = lambda: tokenizer.count(prompt)  # noqa: E731
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        prompt_tokens, count = self._prompt_size(size, count, max_tokens)
        bad = self._check_lengths(prompt_tokens or 0, max_tokens)
        if bad:
            return bad
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        opts = body.get("stream_options") or {}
        chunks = OpenAIChunks(rid, self.cfg.model, chat, bool(opts.get("continuous_usage_stats")), prompt_tokens)
        want_usage = bool(opts.get("include_usage"))
        want_spec = bool(body.get("return_spec_tokens_details")) and self.cfg.engine_name != "vllm"
        req = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_tokens=int(max_tokens), t_arrival_ns=t_arrival,
                         count_prompt=count)
        if not body.get("stream"):
            return await self._unary_openai(req, chunks, want_spec)
        resp = await self._prepare_sse(request)
        truth = self._truth_row(req, "openai-chat" if chat else "openai-completions")

        async def events():
            if chat:
                yield sse(chunks.role()), 0
            sent = 0
            while sent < req.max_tokens:
                k = await self._maybe_fault(req, await req.queue.get(), resp)
                chunks.prompt_tokens = req.prompt_tokens
                finish = "length" if sent + k >= req.max_tokens else None
                yield sse(chunks.content(text_for(sent, k), sent + k, finish)), k
                sent += k
            if want_spec:
                yield sse(chunks.spec(spec_details(req.generated, req.verify_ct, self.engine.spec.budget))), 0
            if want_usage:
                yield sse(chunks.final_usage(req.generated)), 0

        self.engine.submit(req)
        return await self._stream(resp, req, truth, events())

    async def generate(self, request: web.Request) -> web.StreamResponse:
        t_arrival = request["t_arrival_ns"]
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        text = body.get("text")
        if not isinstance(text, str):
            return error_response("'text' must be a string", 400)
        params = body.get("sampling_params") or {}
        max_tokens = int(params.get("max_new_tokens") or 128)
        prompt_tokens, count = self._prompt_size(len(text), lambda: tokenizer.count(text), max_tokens)
        bad = self._check_lengths(prompt_tokens or 0, max_tokens)
        if bad:
            return bad
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        req = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_tokens=max_tokens, t_arrival_ns=t_arrival,
                         count_prompt=count)
        truth = self._truth_row(req, "sglang-generate")
        if not body.get("stream"):
            truth["stream"] = False
            self.engine.submit(req)
            await _drain(req)
            self._end(truth, req, "ok")
            return json_response(generate_event(rid, text_for(0, req.generated), req.generated, req.prompt_tokens,
                                                {"type": "length", "length": req.generated},
                                                self._final_meta(req)))
        resp = await self._prepare_sse(request)

        async def events():
            n = 0
            text_so_far = ""  # /generate streams cumulative text; extend it rather than re-render it
            while n < req.max_tokens:
                k = await self._maybe_fault(req, await req.queue.get(), resp)
                text_so_far += text_for(n, k)
                n += k
                done = n >= req.max_tokens
                event = generate_event(rid, text_so_far, n, req.prompt_tokens,
                                       {"type": "length", "length": n} if done else None,
                                       self._final_meta(req) if done else None)
                yield sse(event), k

        self.engine.submit(req)
        return await self._stream(resp, req, truth, events())

    # ---- helpers ---------------------------------------------------------------------------------------
    async def _stream(self, resp: web.StreamResponse, req: SimRequest, truth: dict, events) -> web.StreamResponse:
        """Write `events` ((bytes, tokens) pairs; content chunks are stamped in the truth), then [DONE]. A client
        that goes away aborts the request in the engine."""
        try:
            async for data, k in events:
                await resp.write(data)
                if k:
                    _stamp(truth, k, self.engine)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abort(req)
            self._end(truth, req, "client_disconnected")
            raise
        self._end(truth, req, "ok")
        return resp

    def _prompt_size(self, chars: int, count, max_tokens) -> tuple[int | None, object]:
        """(prompt_tokens, deferred counter). Tokenizing is deferred to the engine's admission (SGLang's
        tokenizer also runs off the HTTP path) unless the prompt might exceed the context: a token is at least
        one character, so `chars + max_tokens ≤ context` proves it fits without counting."""
        if isinstance(max_tokens, int) and chars + max_tokens <= self.cfg.context_length:
            return None, count
        return count(), None

    def _check_lengths(self, prompt_tokens: int, max_tokens) -> web.Response | None:
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return error_response("max_tokens must be a positive integer", 400)
        if prompt_tokens + max_tokens > self.cfg.context_length:
            return error_response(
                f"Requested token count exceeds the model's maximum context length of "
                f"{self.cfg.context_length} tokens. You requested a total of {prompt_tokens + max_tokens} "
                f"tokens: {prompt_tokens} tokens from the input messages and {max_tokens} tokens for the "
                f"completion.", 400)
        return None

    def _final_meta(self, req: SimRequest) -> dict:
        d = spec_details(req.generated, req.verify_ct, self.engine.spec.budget)
        d["e2e_latency"] = (time.monotonic_ns() - req.t_arrival_ns) / 1e9
        return d

    async def _unary_openai(self, req: SimRequest, chunks: OpenAIChunks, want_spec: bool) -> web.Response:
        truth = self._truth_row(req, "openai-chat" if chunks.chat else "openai-completions")
        truth["stream"] = False
        self.engine.submit(req)
        await _drain(req)
        self._end(truth, req, "ok")
        chunks.prompt_tokens = req.prompt_tokens
        text = text_for(0, req.generated)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                  if chunks.chat else {"index": 0, "text": text, "finish_reason": "length"})
        obj = {"id": req.rid, "object": "chat.completion" if chunks.chat else "text_completion",
               "created": chunks.created, "model": self.cfg.model, "choices": [choice],
               "usage": chunks.usage(req.generated)}
        if want_spec:
            obj["sglext"] = {"spec_tokens_details": spec_details(req.generated, req.verify_ct,
                                                                 self.engine.spec.budget)}
        return json_response(obj)

    async def _prepare_sse(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    async def _maybe_fault(self, req: SimRequest, k: int, resp: web.StreamResponse) -> int:
        if self.hooks is not None:
            return await self.hooks.on_chunk(req, k, resp)
        return k

    def _truth_row(self, req: SimRequest, api: str) -> dict:
        return {"rid": req.rid, "api": api, "stream": True, "t_arrival_ns": req.t_arrival_ns,
                "t_first_chunk_ns": None, "chunk_times_ns": [], "chunk_tokens": [],
                "prompt_tokens": req.prompt_tokens, "max_tokens": req.max_tokens}

    def _end(self, truth: dict, req: SimRequest, outcome: str) -> None:
        truth.update(t_end_ns=time.monotonic_ns(), verify_ct=req.verify_ct, completion_tokens=req.generated,
                     prompt_tokens=req.prompt_tokens,
                     outcome=outcome, budget=self.engine.spec.budget, accept_mean=self.engine.accept_mean)
        if truth["chunk_times_ns"]:
            truth["t_first_chunk_ns"] = truth["chunk_times_ns"][0]
        if self.hooks is not None:
            truth.update(self.hooks.truth_fields())
        self.truth.write(truth)


async def _drain(req: SimRequest) -> None:
    got = 0
    while got < req.max_tokens:
        got += await req.queue.get()


def _stamp(truth: dict, k: int, engine: Engine) -> None:
    now = time.monotonic_ns()
    if not truth["chunk_times_ns"]:
        engine.ttft_hist.observe((now - truth["t_arrival_ns"]) / 1e9)
    truth["chunk_times_ns"].append(now)
    truth["chunk_tokens"].append(k)


async def _json_body(request: web.Request):
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return error_response("request body is not valid JSON", 400)
    if not isinstance(body, dict):
        return error_response("request body must be a JSON object", 400)
    return body
