"""SGLang's native generation: POST /generate, unary or streamed.

Each streamed event carries the text so far (cumulative, as SGLang streams it) and `meta_info`; the last one
has finish_reason {"type": "length"} and the request's spec details with e2e_latency.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from aiohttp import web

from loadgen.sim import tokenizer
from loadgen.sim.engine import SimRequest
from loadgen.sim.generation import Generations
from loadgen.sim.prompt_kind import prompt_kind
from loadgen.sim.render import generate_event, sse, text_for
from loadgen.sim.responses import error_response, json_response, read_json_object

API = "sglang-generate"
DEFAULT_MAX_NEW_TOKENS = 128


class GenerateRoute:
    def __init__(self, generations: Generations):
        self.gen = generations

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/generate", self.generate)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        if isinstance(body, web.Response):
            return body
        text = body.get("text")
        if not isinstance(text, str):
            return error_response("'text' must be a string", 400)
        params = body.get("sampling_params") or {}
        max_tokens = int(params.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS)
        prompt_tokens, count = self.gen.prompt_size(len(text), lambda: tokenizer.count(text), max_tokens)
        bad = self.gen.check_lengths(prompt_tokens or 0, max_tokens)
        if bad:
            return bad
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        req = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_tokens=max_tokens,
                         t_arrival_ns=request["t_arrival_ns"], count_prompt=count, kind=prompt_kind(text),
                         prompt=text)
        if body.get("stream"):
            return await self.gen.stream(request, req, API, lambda resp: self._events(req, resp))
        await self.gen.run_unary(req, API)
        return json_response(generate_event(rid, text_for(req, 0, req.generated), req.generated, req.prompt_tokens,
                                            {"type": "length", "length": req.generated}, self.gen.final_meta(req),
                                            output_ids=req.tokens(0, req.generated)))

    async def _events(self, req: SimRequest, resp: web.StreamResponse) -> AsyncIterator[tuple[bytes, int]]:
        n = 0
        text_so_far = ""  # extended chunk by chunk rather than re-rendered
        while n < req.max_tokens:
            k = await self.gen.next_chunk(req, resp)
            text_so_far += text_for(req, n, k)
            n += k
            done = n >= req.max_tokens
            event = generate_event(req.rid, text_so_far, n, req.prompt_tokens,
                                   {"type": "length", "length": n} if done else None,
                                   self.gen.final_meta(req) if done else None)
            yield sse(event), k
