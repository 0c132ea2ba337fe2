"""What every generation route shares: the context check, the truth row, and a request's run to its end.

A route parses its body, builds a `SimRequest`, then either `run_unary` (wait for every token, answer once) or
`stream` (write each chunk as the engine emits it). Both write the request's truth row when it ends; a
streamed content chunk is stamped in the truth when written, and the first one observes TTFT =
(first chunk written − arrival) / 1e9 s in the `/metrics` histogram.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from loadgen.names import Outcome
from loadgen.sim.engine import Engine, SimRequest
from loadgen.sim.llamacpp import prompt_ids
from loadgen.sim.metrics import TtftHistogram
from loadgen.sim.render import spec_details
from loadgen.sim.responses import error_response, open_sse
from loadgen.sim.truth import TruthLog

# (bytes to write, content tokens they carry; 0 = not a content chunk) for one open stream
Events = Callable[[web.StreamResponse], AsyncIterator[tuple[bytes, int]]]


class Generations:
    def __init__(self, engine: Engine, context_length: int, truth: TruthLog, ttft: TtftHistogram, hooks=None,
                 latency=None, prefix_cache=None):
        self.prefix_cache = prefix_cache  # PageCache (--cache-report), or None: nothing is served from a cache
        self.engine = engine
        self.context_length = context_length
        self.truth = truth
        self.ttft = ttft
        self.hooks = hooks
        self.latency = latency  # ServerLatency: queue time, ITL, E2E histograms (SGLang only)

    # ---- admission -------------------------------------------------------------------------------------
    def prompt_size(self, chars: int, count: Callable[[], int], max_tokens) -> tuple[int | None, Callable | None]:
        """(prompt_tokens, deferred counter). Tokenizing is deferred to the engine's admission (SGLang's
        tokenizer also runs off the HTTP path) unless the prompt might exceed the context: a token is at least
        one character, so `chars + max_tokens ≤ context` proves it fits without counting."""
        if isinstance(max_tokens, int) and chars + max_tokens <= self.context_length:
            return None, count
        return count(), None

    def check_lengths(self, prompt_tokens: int, max_tokens) -> web.Response | None:
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return error_response("max_tokens must be a positive integer", 400)
        if prompt_tokens + max_tokens > self.context_length:
            return error_response(
                f"Requested token count exceeds the model's maximum context length of "
                f"{self.context_length} tokens. You requested a total of {prompt_tokens + max_tokens} "
                f"tokens: {prompt_tokens} tokens from the input messages and {max_tokens} tokens for the "
                f"completion.", 400)
        return None

    def serve_prefix(self, req: SimRequest) -> None:
        """With a prefix cache: the prompt's cached tokens (`req.cached_tokens`); the engine prefills the rest."""
        if self.prefix_cache is not None:
            req.cached_tokens = self.prefix_cache.admit(prompt_ids(req.prompt))

    # ---- per-request details -----------------------------------------------------------------------------
    def spec_details(self, req: SimRequest) -> dict:
        return spec_details(req.generated, req.verify_ct, self.engine.spec.budget, req.correct_drafts)

    def final_meta(self, req: SimRequest) -> dict:
        """The spec details plus e2e_latency = (now − arrival) / 1e9 s."""
        d = self.spec_details(req)
        d["e2e_latency"] = (time.monotonic_ns() - req.t_arrival_ns) / 1e9
        return d

    async def next_chunk(self, req: SimRequest, resp: web.StreamResponse) -> int:
        """Tokens of the request's next emission, once the fault hooks (if any) let it through."""
        k = await req.queue.get()
        if self.hooks is not None:
            return await self.hooks.on_chunk(req, k, resp)
        return k

    # ---- running -----------------------------------------------------------------------------------------
    async def run_unary(self, req: SimRequest, api: str) -> None:
        """Submit `req` and wait for all its tokens (a unary answer is written after this returns)."""
        truth = self._truth_row(req, api)
        truth["stream"] = False
        self.serve_prefix(req)
        self.engine.submit(req)
        got = 0
        while got < req.max_tokens:
            got += await req.queue.get()
        self._end(truth, req, Outcome.OK)

    async def stream(self, request: web.Request, req: SimRequest, api: str, events: Events) -> web.StreamResponse:
        """Open the SSE response, submit `req`, write `events(resp)`, then [DONE]. A client that goes away
        aborts the request in the engine."""
        resp = await open_sse(request)
        truth = self._truth_row(req, api)
        self.serve_prefix(req)
        self.engine.submit(req)
        try:
            async for data, k in events(resp):
                await resp.write(data)
                if k:
                    self._stamp(truth, k)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abort(req)
            self._end(truth, req, "client_disconnected")
            raise
        self._end(truth, req, Outcome.OK)
        return resp

    # ---- truth -------------------------------------------------------------------------------------------
    def _truth_row(self, req: SimRequest, api: str) -> dict:
        return {"rid": req.rid, "api": api, "stream": True, "t_arrival_ns": req.t_arrival_ns,
                "t_first_chunk_ns": None, "chunk_times_ns": [], "chunk_tokens": [],
                "prompt_tokens": req.prompt_tokens, "max_tokens": req.max_tokens}

    def _stamp(self, truth: dict, k: int) -> None:
        now = time.monotonic_ns()
        if not truth["chunk_times_ns"]:
            self.ttft.observe((now - truth["t_arrival_ns"]) / 1e9)
        truth["chunk_times_ns"].append(now)
        truth["chunk_tokens"].append(k)

    def _end(self, truth: dict, req: SimRequest, outcome: str) -> None:
        """`outcome`: Outcome.OK, or the truth's word for a request the client left (client_disconnected)."""
        truth.update(t_end_ns=time.monotonic_ns(), verify_ct=req.verify_ct, correct_drafts=list(req.correct_drafts),
                     completion_tokens=req.generated,
                     prompt_tokens=req.prompt_tokens, cached_tokens=req.cached_tokens,
                     reasoning_chunks=req.reasoning_chunks,
                     outcome=outcome, budget=self.engine.spec.budget, prompt_kind=req.kind, prompt=req.prompt,
                     accept_mean=self.engine.kind_means[req.kind], accept_mean_config=self.engine.accept_mean)
        if req.output is not None and self.engine.output_faults.any():
            truth.update(loop_from=req.output.loop_from, drift_from=req.output.drift_from)
        if truth["chunk_times_ns"]:
            truth["t_first_chunk_ns"] = truth["chunk_times_ns"][0]
        if self.hooks is not None:
            truth.update(self.hooks.truth_fields())
        if self.latency is not None and outcome is Outcome.OK:
            self.latency.observe_end(truth, req.t_admitted_ns)
        self.truth.write(truth)
