"""`loadgen sim --engine llamacpp`: llama.cpp's llama-server on the wire (shared/samples/llamacpp-*).

- Streams: one SSE event per token, even when a verify step committed several; no running usage. Chat: a role
  event, the content events, a finish event (`delta: {}`), then (with `stream_options.include_usage`) a usage
  chunk with `choices: []` that carries `timings`. Completions: `usage` and `timings` in the finish event
  itself, no separate usage chunk.
- `timings`: `cache_n` (prompt tokens served by the prefix cache), `prompt_n` (computed), `predicted_n`, and
  with speculative decoding `draft_n` (draft tokens proposed) and `draft_n_accepted`; `usage` carries
  `prompt_tokens_details.cached_tokens` = `cache_n`.
- Prefix cache: the longest common token prefix with any of the last `PrefixCache.size` prompts, at most the
  prompt's length − 1 (llama.cpp always computes the last prompt token). The truth row's `cached_tokens`
  is the exact figure.
- `/metrics` (`llamacpp:` names), moved when a streamed request completes: `spec_decode_num_drafts_total`
  (verify steps), `…_num_draft_tokens_total`, `…_num_accepted_tokens_total` (accept length = 1 +
  Δaccepted / Δdrafts, vLLM's formula), `prompt_tokens_total` (computed), `prompt_tokens_cached_total`,
  `tokens_predicted_total`. Per request: drafts = verify steps, accepted = completion − 1 − verify steps
  (the prefill's token and each step's bonus token are no accepted draft), proposed = max(verify · budget,
  accepted).
- `--log-file`: llama-server's line at each streamed request's end (`slot print_timing: … draft acceptance =
  r (a accepted / g generated), mean len = m`, m = 1 + a / drafts, printed with two decimals).
- `/tokenize {content}` → `{tokens}` (`{prompt}` → `{tokens: []}`, as llama-server answers it), and
  `/v1/chat/completions/input_tokens` → `{input_tokens}` (the chat prompt's count, template included).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client.metrics_core import Metric

from loadgen.sim import tokenizer
from loadgen.sim.engine import Engine, SimRequest
from loadgen.sim.metrics import counter, gauge
from loadgen.sim.render import sse, text_for
from loadgen.sim.responses import json_response, read_json_object

BUILD = "b1-sim"
CHAT_OPEN_IDS = (1, 2, 3)  # the template's tokens before a message and after it: tokenizer.TEMPLATE_TOKENS
CHAT_CLOSE_IDS = (4, 5)


def prompt_ids(prompt) -> list[int]:
    """The prompt's token ids as the imitation counts them: a completions text, or chat messages each inside
    the template's fixed tokens (the same count as `tokenizer.chat_prompt_tokens`)."""
    if isinstance(prompt, str):
        return tokenizer.encode(prompt)
    ids: list[int] = []
    for m in prompt if isinstance(prompt, list) else []:
        ids += [*CHAT_OPEN_IDS, *tokenizer.encode(str(m.get("content") or "")), *CHAT_CLOSE_IDS]
    return ids


class PrefixCache:
    """The last `size` prompts' ids; a new prompt is served the longest prefix it shares with one of them."""

    def __init__(self, size: int = 64):
        self.recent: deque[list[int]] = deque(maxlen=size)

    def admit(self, ids: list[int]) -> int:
        best = 0
        for old in self.recent:
            n = 0
            for a, b in zip(old, ids):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self.recent.append(ids)
        return min(best, max(0, len(ids) - 1))


class LlamaCppCounters:
    """llama-server's cumulative counters, moved when a request completes."""

    def __init__(self) -> None:
        self.drafts = self.draft_tokens = self.accepted = 0
        self.prompt_tokens = self.prompt_cached = self.predicted = 0

    def complete(self, draft: dict, prompt_tokens: int, cached: int, predicted: int) -> None:
        self.drafts += draft["steps"]
        self.draft_tokens += draft["draft_n"]
        self.accepted += draft["draft_n_accepted"]
        self.prompt_tokens += prompt_tokens - cached
        self.prompt_cached += cached
        self.predicted += predicted


class LlamaCppCollector:
    def __init__(self, engine: Engine, counters: LlamaCppCounters):
        self.engine = engine
        self.c = counters

    def collect(self) -> Iterator[Metric]:
        c, e = self.c, self.engine
        for name, help_text, value in (
            ("prompt_tokens", "Number of prompt tokens processed, excluding cached tokens", c.prompt_tokens),
            ("prompt_tokens_cached", "Number of prompt tokens reused from the cache", c.prompt_cached),
            ("tokens_predicted", "Number of generation tokens processed", c.predicted),
            ("spec_decode_num_draft_tokens", "Speculative: Total draft tokens generated", c.draft_tokens),
            ("spec_decode_num_accepted_tokens", "Speculative: Total draft tokens accepted by the target model",
             c.accepted),
            ("spec_decode_num_drafts", "Speculative: Total speculative decoding verification steps", c.drafts),
        ):
            yield counter(f"llamacpp:{name}", help_text, {}, value)
        yield gauge("llamacpp:requests_processing", "Number of requests processing", {}, len(e.running))
        yield gauge("llamacpp:requests_deferred", "Number of requests deferred", {}, len(e.waiting))


class LlamaCppWire:
    """The stream of one request as llama-server writes it (module docstring)."""

    def __init__(self, generations, counters: LlamaCppCounters, model: str, log_file: str | None = None):
        self.gen = generations
        self.counters = counters
        self.model = model
        self.cache = PrefixCache()
        self.log = None if not log_file else sys.stdout if log_file == "-" else open(log_file, "a")  # noqa: SIM115

    def log_line(self, req: SimRequest, draft: dict) -> None:
        if self.log is None or not draft["steps"]:
            return
        a, g = draft["draft_n_accepted"], draft["draft_n"]
        self.log.write(f"slot print_timing: id  0 | task {req.rid[:8]} | draft acceptance = {a / g if g else 0:.5f} "
                       f"({a:5d} accepted / {g:5d} generated), mean len = {1 + a / draft['steps']:5.2f}\n")
        self.log.flush()

    def admit(self, req: SimRequest) -> None:
        """Serve the prompt's shared prefix from the cache (`req.cached_tokens`, also in the truth)."""
        req.cached_tokens = self.cache.admit(prompt_ids(req.prompt))

    def draft(self, req: SimRequest) -> dict:
        accepted = max(0, req.generated - 1 - req.verify_ct)
        return {"steps": req.verify_ct, "draft_n": max(req.verify_ct * self.gen.engine.spec.budget, accepted),
                "draft_n_accepted": accepted}

    def _base(self, req: SimRequest, chat: bool, choices: list) -> dict:
        return {"choices": choices, "created": int(time.time()), "id": f"chatcmpl-{req.rid}", "model": self.model,
                "system_fingerprint": BUILD, "object": "chat.completion.chunk" if chat else "text_completion"}

    def _choice(self, chat: bool, text: str | None, finish: str | None) -> dict:
        if chat:
            return {"finish_reason": finish, "index": 0, "delta": {} if text is None else {"content": text}}
        return {"text": text or "", "index": 0, "logprobs": None, "finish_reason": finish}

    def _final(self, req: SimRequest, t0_ns: int) -> dict:
        prompt, cached, draft = req.prompt_tokens or 0, req.cached_tokens, self.draft(req)
        usage = {"completion_tokens": req.generated, "prompt_tokens": prompt, "total_tokens": prompt + req.generated,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        gen_ms = (time.monotonic_ns() - t0_ns) / 1e6
        timings = {"cache_n": cached, "prompt_n": prompt - cached, "predicted_n": req.generated,
                   "predicted_ms": gen_ms, "predicted_per_second": req.generated / gen_ms * 1e3 if gen_ms else 0.0}
        if draft["steps"]:
            timings |= {"draft_n": draft["draft_n"], "draft_n_accepted": draft["draft_n_accepted"]}
        self.counters.complete(draft, prompt, cached, req.generated)
        self.log_line(req, draft)
        return {"usage": usage, "timings": timings}

    async def events(self, req: SimRequest, chunks, extras, resp: web.StreamResponse
                     ) -> AsyncIterator[tuple[bytes, int]]:
        chat, sent, t0 = chunks.chat, 0, time.monotonic_ns()
        if chat:
            yield sse(self._base(req, chat, [{"finish_reason": None, "index": 0,
                                              "delta": {"role": "assistant", "content": None}}])), 0
        while sent < req.max_tokens:
            k = await self.gen.next_chunk(req, resp)
            for i in range(k):
                yield sse(self._base(req, chat, [self._choice(chat, text_for(req, sent + i, 1), None)])), 1
            sent += k
        final = self._final(req, t0)
        finish = self._base(req, chat, [self._choice(chat, None, "length")])
        if not chat:
            yield sse(finish | final), 0
            return
        yield sse(finish), 0
        if extras.usage:
            yield sse(self._base(req, chat, []) | final), 0


class LlamaCppRoutes:
    """llama-server's tokenizer endpoints, `/v1/models` (`owned_by: llamacpp`, `meta.n_ctx`) and `/props`."""

    def __init__(self, model: str, context_length: int, total_slots: int, started_at_s: float):
        self.model = model
        self.context_length = context_length
        self.total_slots = total_slots
        self.started_at_s = started_at_s

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/tokenize", self.tokenize)
        router.add_post("/v1/chat/completions/input_tokens", self.input_tokens)
        router.add_get("/v1/models", self.models)
        router.add_get("/props", self.props)

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if isinstance(body, web.Response):
            return body
        content = body.get("content")
        return json_response({"tokens": tokenizer.encode(content) if isinstance(content, str) else []})

    async def input_tokens(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if isinstance(body, web.Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return json_response({"error": {"code": 400, "message": "'messages' is required",
                                            "type": "invalid_request_error"}}, 400)
        return json_response({"input_tokens": len(prompt_ids(messages)), "object": "response.input_tokens"})

    async def models(self, request: web.Request) -> web.Response:
        return json_response({"object": "list", "data": [{
            "id": self.model, "object": "model", "created": int(self.started_at_s), "owned_by": "llamacpp",
            "meta": {"n_ctx": self.context_length, "n_vocab": tokenizer.VOCAB}}]})

    async def props(self, request: web.Request) -> web.Response:
        return json_response({"default_generation_settings": {"n_ctx": self.context_length},
                              "total_slots": self.total_slots, "model_path": self.model, "build_info": BUILD,
                              "endpoint_metrics": True, "endpoint_slots": True})


@dataclass
class LlamaCppParts:
    routes: LlamaCppRoutes
    wire: LlamaCppWire
    collector: LlamaCppCollector


def llamacpp_parts(engine: Engine, cfg, generations) -> LlamaCppParts:
    """The imitation's routes, stream shape and `/metrics` collector, sharing one set of counters."""
    counters = LlamaCppCounters()
    return LlamaCppParts(LlamaCppRoutes(cfg.model, cfg.context_length, engine.max_running, time.time()),
                         LlamaCppWire(generations, counters, cfg.model, cfg.log_file),
                         LlamaCppCollector(engine, counters))
