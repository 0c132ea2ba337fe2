"""OpenAI-compatible generation: POST /v1/chat/completions and /v1/completions, unary or streamed.

A stream is: (chat only) a role chunk, one content chunk per engine emission, the last with
finish_reason "length", then on request SGLang's `sglext.spec_tokens_details` chunk
(`return_spec_tokens_details`, not on a vLLM imitation) and a usage chunk (`stream_options.include_usage`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import web

from loadgen.sim import tokenizer
from loadgen.sim.engine import SimRequest
from loadgen.sim.generation import Generations
from loadgen.sim.per_token import step_events
from loadgen.sim.prompt_kind import chat_text, prompt_kind
from loadgen.sim.render import OpenAIChunks, sse, text_for, token_logprobs
from loadgen.sim.responses import error_response, json_response, read_json_object

DEFAULT_MAX_TOKENS = 16
CHAT_TEMPLATE_CHARS = 64  # the template's characters around the messages, for the no-count context proof


@dataclass
class _Extras:
    """What the request asked for beyond the text."""

    usage: bool  # a final usage chunk
    spec: bool  # SGLang's spec_tokens_details
    logprobs: bool = False  # the tokens of a unary answer (`logprobs`)


class OpenAIRoutes:
    def __init__(self, generations: Generations, model: str, spec_details: bool = True,
                 per_token_events: bool = False, wire=None, reasoning_tokens: int = 0):
        self.reasoning_tokens = reasoning_tokens  # a chat answer's first tokens, streamed as reasoning_content
        self.wire = wire  # another server's stream shape (`llamacpp.LlamaCppWire`), None for SGLang's
        self.per_token_events = per_token_events  # a step's tokens as one-token events (sim/per_token.py)
        self.gen = generations
        self.model = model
        self.spec_details = spec_details  # vLLM returns no per-request spec details

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self.chat)
        router.add_post("/v1/completions", self.completions)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=False)

    async def _handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await read_json_object(request)
        if isinstance(body, web.Response):
            return body
        model = body.get("model")
        if model is not None and model != self.model:
            return error_response(f"The model `{model}` does not exist.", 404)
        prompt = _prompt_size(body, chat)
        if isinstance(prompt, web.Response):
            return prompt
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
        prompt_tokens, count = self.gen.prompt_size(*prompt, max_tokens)
        bad = self.gen.check_lengths(prompt_tokens or 0, max_tokens)
        if bad:
            return bad
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        opts = body.get("stream_options") or {}
        chunks = OpenAIChunks(rid, self.model, chat, bool(opts.get("continuous_usage_stats")), prompt_tokens)
        chunks.reasoning_budget = self.reasoning_tokens if chat else 0
        extras = _Extras(usage=bool(opts.get("include_usage")),
                         spec=bool(body.get("return_spec_tokens_details")) and self.spec_details,
                         logprobs=body.get("logprobs") not in (None, False))
        req = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_tokens=int(max_tokens),
                         t_arrival_ns=request["t_arrival_ns"], count_prompt=count, **_kind(body, chat))
        if not body.get("stream"):
            return await self._unary(req, chunks, extras)
        events = self._events if self.wire is None else self.wire.events
        if self.wire is not None:
            self.wire.admit(req)
        return await self.gen.stream(request, req, _api(chat), lambda resp: events(req, chunks, extras, resp))

    async def _unary(self, req: SimRequest, chunks: OpenAIChunks, extras: _Extras) -> web.Response:
        await self.gen.run_unary(req, _api(chunks.chat))
        chunks.prompt_tokens = req.prompt_tokens
        if self.gen.prefix_cache is not None:
            chunks.cached_tokens = req.cached_tokens
        text = text_for(req, 0, req.generated)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                  if chunks.chat else {"index": 0, "text": text, "finish_reason": "length"})
        if extras.logprobs:
            choice["logprobs"] = token_logprobs(req.tokens(0, req.generated), chunks.chat)
        obj = {"id": req.rid, "object": "chat.completion" if chunks.chat else "text_completion",
               "created": chunks.created, "model": self.model, "choices": [choice],
               "usage": chunks.usage(req.generated)}
        if extras.spec:
            obj["sglext"] = {"spec_tokens_details": self.gen.spec_details(req)}
        return json_response(obj)

    async def _events(self, req: SimRequest, chunks: OpenAIChunks, extras: _Extras,
                      resp: web.StreamResponse) -> AsyncIterator[tuple[bytes, int]]:
        if chunks.chat:
            yield sse(chunks.role()), 0
        sent = 0
        while sent < req.max_tokens:
            k = await self.gen.next_chunk(req, resp)
            chunks.prompt_tokens = req.prompt_tokens  # known once the engine has admitted the request
            if self.gen.prefix_cache is not None:
                chunks.cached_tokens = req.cached_tokens
            finish = "length" if sent + k >= req.max_tokens else None
            if self.per_token_events:
                yield step_events(chunks, req, sent, k, finish), k
            else:
                for data, n in _split(chunks, sent, k, finish, req):
                    yield data, n
            sent += k
        if extras.spec:
            yield sse(chunks.spec(self.gen.spec_details(req))), 0
        if extras.usage:
            yield sse(chunks.final_usage(req.generated)), 0


def _split(chunks: OpenAIChunks, sent: int, k: int, finish: str | None, req: SimRequest) -> list[tuple[bytes, int]]:
    """A step's k tokens as one content event, or, where they are (partly) reasoning, a reasoning event for
    the tokens before the budget's end and a content event for the rest."""
    r = max(0, min(k, chunks.reasoning_budget - sent))
    parts = [(r, True), (k - r, False)] if r else [(k, False)]
    out, at = [], sent
    for n, reasoning in parts:
        if n:
            req.reasoning_chunks += reasoning
            at += n
            out.append((sse(chunks.content(text_for(req, at - n, n), at, finish if at == sent + k else None, reasoning)), n))
    return out


def _api(chat: bool) -> str:
    return "openai-chat" if chat else "openai-completions"


def _kind(body: dict, chat: bool) -> dict:
    """The prompt as received and its kind (`prompt_kind`), for the engine and the truth."""
    prompt = body["messages"] if chat else body["prompt"]  # both checked by _prompt_size
    return {"prompt": prompt, "kind": prompt_kind(chat_text(prompt) if chat else prompt)}


def _prompt_size(body: dict, chat: bool) -> tuple[int, Callable[[], int]] | web.Response:
    """(characters bounding the prompt's tokens, its token counter), or the 400 for a missing prompt."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return error_response("'messages' must be a non-empty list", 400)
        chars = sum(len(str(m.get("content") or "")) for m in messages) + CHAT_TEMPLATE_CHARS
        return chars, lambda: tokenizer.chat_prompt_tokens(messages)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        return error_response("'prompt' must be a string", 400)
    return len(prompt), lambda: tokenizer.count(prompt)
