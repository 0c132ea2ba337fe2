"""A reference OpenAI-compatible server that is not loadgen's simulator: a continuous-batching model with faults.

    python3 -m tests.reference_server --port 0 [flags]   # prints `reference-server ready on http://127.0.0.1:PORT`

It imports nothing of loadgen (aiohttp and orjson only), so a check run against it is not loadgen agreeing with
itself. It serves `GET /v1/models`, `GET /health`, `POST /v1/chat/completions` and `POST /v1/completions`
(streamed as SSE with `stream_options.include_usage`, or unary with `logprobs` token lists) and nothing else:
no `/metrics`, no tokenizer, no engine's info route, so loadgen sees a generic OpenAI server (`engine=openai`),
unless `--info KEY=VALUE` (repeatable) is given: then `GET /server_info` answers an object of those keys (a value
that parses as JSON is that value, else the string), as SGLang declares its settings (`disable_cuda_graph=true`),
and loadgen takes it for SGLang.

The model (one engine task, one event loop):
- `--slots N` (64) requests are decoded at once; the others wait in arrival order and join at a step boundary.
- One iteration lasts `(step_ms + step_ms_per_slot × running + Σ prefill_ms of the requests it admits) × slow
  factor`, where `running` counts the requests it decodes (those it admits included) and `prefill_ms =
  prefill_ms_per_1k_tokens × prompt_tokens / 1000` (`--step-ms` 5, `--step-ms-per-slot` 0,
  `--prefill-ms-per-1k-tokens` 5 by default: a lone request of 1,000 prompt tokens has its first token after
  10 ms); at its end every running request has one more token (an admitted request's first token comes from the
  iteration that prefilled it).
- Outputs are greedy words of a fixed vocabulary, a function of the prompt text only (`temperature` is ignored):
  word k of prompt p is drawn by `random.Random(blake2b(p))`. A quarter of prompts (by the same hash) end by
  themselves after 16–256 words (`finish_reason: "stop"`) unless the request sets `ignore_eos`; the others
  and every request past `max_tokens` (or `max_completion_tokens`) end with `"length"`.
- `usage.prompt_tokens = ceil(UTF-8 bytes of the prompt / 4)` (chat: the messages' contents joined by a newline,
  no template); `completion_tokens` is the number of words written. One word is one token and one SSE event.

Speculative mode (off by default; `--accept-length A --draft-cap K`), as SGLang's verify steps:
- The iteration that admits a request prefills it and gives it its first token; that is not a verify step. Every
  later iteration is one verify step of the request: it commits `k = 1 + Binomial(K − 1, (A − 1)/(K − 1))` tokens
  (the accepted drafts and the bonus token; drawn per request per step from one `random.Random(--seed)`, so the
  mean is exactly A), cut to what the request still may write (`max_tokens`, or its natural end): the last
  step may commit fewer.
- The step's k tokens are ONE SSE event (SGLang streams a verify step at once).
- Per request: `spec_verify_ct` n = its verify steps; `spec_correct_drafts_histogram` H, K entries, H[j] = its
  verify steps that committed j + 1 tokens (accepted j drafts), so Σ_j H[j] = n and
  `completion_tokens = 1 + Σ_j (j + 1)·H[j]`; `spec_accept_length = completion_tokens / n` (the prefill's token
  counted, as SGLang's is; 0 when n = 0); `spec_num_correct_drafts = Σ_j j·H[j]`, `spec_num_proposed_drafts =
  n·(K − 1)`, `spec_accept_rate` = their ratio. A body with `"return_spec_tokens_details": true` gets them as
  `{"choices": [], "sglext": {"spec_tokens_details": {...}}}`: a stream's event after the finish chunk and
  before the usage chunk, a unary answer's `sglext` key.
- Steady state at concurrency c, all slots full: c·A / (step_ms + step_ms_per_slot·c) × 1000 output tok/s
  (tests/spec_truth.py, with what that leaves out).

Faults (each off by default); "the N-th request" counts every POST to a generation route since the start:
- `--fffd-fraction F`: that fraction of prompts (by hash) hold U+FFFD as tokens 3, 35, 67, … at every batch size.
- `--loop-above N`: a request whose batch holds more than N requests when it writes its token `LOOP_AT` repeats
  that word to the end of its output (no natural stop). The batch is read a few steps into the request, not
  at its first step, so that a wave of requests sent together is judged as the wave, not by its arrival order.
- `--pause-once-after N --pause-s S`: once the N-th request has been received, the engine stops for S seconds
  at its next step boundary (every stream stalls), once.
- `--slow-after N --slow-factor K`: from the N-th request on, every iteration lasts K× as long, for good.
- `--nondeterministic-fraction F`: that fraction of prompts (by hash) write other words from token `DIVERGE_AT`
  on, different on every call, even alone.

`--events FILE` writes one JSON line per event, stamped on CLOCK_MONOTONIC (`time.monotonic_ns()`, the clock of
loadgen's records): `{"event": "pause", "t_ns", "until_ns", "after_request"}`, `{"event": "slow", "t_ns",
"from_request", "factor"}`, and per finished request `{"event": "request", "n", "received_ns", "first_token_ns",
"end_ns", "tokens", "finish", "looped", "fffd", "nondeterministic", "cancelled", "rid"}` (`rid`: the request's
`X-Request-Id` header, or null), and in speculative mode `"verify_ct"` and `"correct_drafts"` (the histogram).

In tests: `url, proc = start(tmp_path, "--slots", "4")` or `with running(tmp_path, ...) as url:`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import math
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiohttp import web

READY = "reference-server ready on"
MODEL = "reference-model"
LOOP_AT = 8  # the token at which --loop-above judges the batch, and from which a looping output repeats
DIVERGE_AT = 12  # the first token of a --nondeterministic-fraction prompt that changes from call to call
FFFD_EVERY, FFFD_FIRST = 32, 3  # U+FFFD positions of a --fffd-fraction prompt: 3, 35, 67, …
STOP_FRACTION = 0.25  # prompts whose output ends by itself (finish_reason "stop") unless ignore_eos
STOP_MIN, STOP_MAX = 16, 256
DEFAULT_MAX_TOKENS = 256
VOCAB = ("the of and to in is was for on that with as by at from his an were are which this be or has had not "
         "first one their its new after who they have her she two been other when there all during into school "
         "time may years more most only over city some world would where later up such used many can state about "
         "national out known university united then made between him while under three team river system both "
         "film second well also series through group year house than game part early area book these each "
         "season band against album music began name history work number water light").split()


@dataclass(frozen=True)
class Faults:
    fffd_fraction: float = 0.0
    loop_above: int | None = None
    pause_once_after: int | None = None
    pause_s: float = 0.0
    slow_after: int | None = None
    slow_factor: float = 1.0
    nondeterministic_fraction: float = 0.0


@dataclass(frozen=True)
class Spec:
    """Speculative mode: each verify step commits 1 + Binomial(draft_cap − 1, p) tokens, p = (A − 1)/(K − 1)."""

    accept_length: float  # A: mean tokens a verify step commits, ≥ 1
    draft_cap: int  # K: the most tokens one verify step commits (the histogram's entries)

    def draw(self, rng: random.Random) -> int:
        if self.draft_cap == 1:
            return 1
        p = (self.accept_length - 1) / (self.draft_cap - 1)
        return 1 + sum(rng.random() < p for _ in range(self.draft_cap - 1))


@dataclass(frozen=True)
class Prompt:
    """What the hash of a prompt decides: its word stream's seed, its faults and its natural end."""

    seed: int
    fffd: bool
    nondeterministic: bool
    natural_end: int | None  # tokens after which the model stops by itself; None: it never does

    @classmethod
    def of(cls, text: str, faults: Faults) -> Prompt:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
        u = [int.from_bytes(digest[i:i + 8], "big") / 2 ** 64 for i in range(8, 32, 8)]
        seed = int.from_bytes(digest[:8], "big")
        end = STOP_MIN + seed % (STOP_MAX - STOP_MIN + 1) if u[2] < STOP_FRACTION else None
        return cls(seed, u[0] < faults.fffd_fraction, u[1] < faults.nondeterministic_fraction, end)


@dataclass(eq=False)
class Generation:
    """One request inside the engine: its word stream, its limits, and the queue its handler reads."""

    prompt: Prompt
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool
    call_no: int
    prefill_ms: float
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    words: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    loop_word: str | None = None
    cancelled: bool = False
    received_ns: int = field(default_factory=time.monotonic_ns)
    first_token_ns: int | None = None
    rid: str | None = None  # the client's X-Request-Id
    verify_ct: int = 0  # speculative mode: verify steps so far
    correct_drafts: list[int] = field(default_factory=list)  # speculative mode: [j] = steps that accepted j drafts
    _rng: random.Random | None = None

    def next_word(self, batch: int, loop_above: int | None) -> str:
        """The word of token `len(words)` in a batch of `batch` running requests."""
        k = len(self.words)
        if k == LOOP_AT and loop_above is not None and batch > loop_above:
            self.loop_word = self._draw(k)
        if self.loop_word is not None:
            return self.loop_word
        if self.prompt.fffd and k % FFFD_EVERY == FFFD_FIRST:
            return "\ufffd"
        return self._draw(k)

    def _draw(self, k: int) -> str:
        if self._rng is None:
            self._rng = random.Random(self.prompt.seed)
        if k == DIVERGE_AT and self.prompt.nondeterministic:
            self._rng = random.Random(self.prompt.seed ^ (self.call_no * 0x9E3779B97F4A7C15))
        word = VOCAB[self._rng.randrange(len(VOCAB))]
        return word if k == 0 else " " + word

    def ended(self) -> str | None:
        """The finish reason once the output is complete, else None."""
        n = len(self.words)
        if n >= self.max_tokens:
            return "length"
        natural = self.prompt.natural_end
        if natural is not None and n >= natural and not self.ignore_eos and self.loop_word is None:
            return "stop"
        return None


class Engine:
    """Continuous batching: `slots` running generations, one token each per iteration; the rest wait."""

    def __init__(self, slots: int, step_ms: float, prefill_ms_per_1k: float, faults: Faults, events=None,
                 step_ms_per_slot: float = 0.0, spec: Spec | None = None, seed: int = 0):
        self.slots = slots
        self.step_s = step_ms / 1000
        self.step_s_per_slot = step_ms_per_slot / 1000
        self.spec = spec
        self.rng = random.Random(seed)  # the verify steps' draws
        self.prefill_ms_per_1k = prefill_ms_per_1k
        self.faults = faults
        self.waiting: deque[Generation] = deque()
        self.running: list[Generation] = []
        self.received = 0
        self.factor = 1.0
        self.pause_pending = False
        self.paused = False
        self.wake = asyncio.Event()
        self.events = events  # a text file for --events, or None

    def log(self, event: str, **fields) -> None:
        if self.events is not None:
            self.events.write(orjson.dumps({"event": event, **fields}).decode() + "\n")

    def log_end(self, gen: Generation) -> None:
        spec = {"verify_ct": gen.verify_ct, "correct_drafts": gen.correct_drafts} if self.spec else {}
        self.log("request", n=gen.call_no, received_ns=gen.received_ns, first_token_ns=gen.first_token_ns,
                 end_ns=time.monotonic_ns(), tokens=len(gen.words), finish=gen.finish_reason,
                 looped=gen.loop_word is not None, fffd=gen.prompt.fffd, nondeterministic=gen.prompt.nondeterministic,
                 cancelled=gen.cancelled, rid=gen.rid, **spec)

    def submit(self, text: str, prompt_tokens: int, max_tokens: int, ignore_eos: bool,
               rid: str | None = None) -> Generation:
        self.received += 1
        f = self.faults
        if f.slow_after is not None and self.received >= f.slow_after and self.factor != f.slow_factor:
            self.factor = f.slow_factor
            self.log("slow", t_ns=time.monotonic_ns(), from_request=self.received, factor=f.slow_factor)
        if f.pause_once_after is not None and self.received >= f.pause_once_after and not self.paused:
            self.pause_pending = self.paused = True
        gen = Generation(Prompt.of(text, f), prompt_tokens, max_tokens, ignore_eos, self.received,
                         self.prefill_ms_per_1k * prompt_tokens / 1000, rid=rid)
        if self.spec is not None:
            gen.correct_drafts = [0] * self.spec.draft_cap
        self.waiting.append(gen)
        self.wake.set()
        return gen

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        t_end = loop.time()
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                t_end = loop.time()
            if self.pause_pending:
                self.pause_pending = False
                t_ns = time.monotonic_ns()
                await asyncio.sleep(self.faults.pause_s)
                self.log("pause", t_ns=t_ns, until_ns=time.monotonic_ns(), after_request=self.faults.pause_once_after)
                t_end = loop.time()
            admitted = self._admit()
            # An absolute schedule: a late wake-up shortens the next wait instead of slowing every step after it.
            busy_s = self.step_s + self.step_s_per_slot * len(self.running) + sum(g.prefill_ms for g in admitted) / 1000
            t_end = max(t_end + busy_s * self.factor, loop.time())
            await asyncio.sleep(t_end - loop.time())
            self._step()

    def _admit(self) -> list[Generation]:
        for gen in self.running:
            if gen.cancelled:
                self.log_end(gen)
        self.running = [g for g in self.running if not g.cancelled]
        admitted = []
        while self.waiting and len(self.running) < self.slots:
            gen = self.waiting.popleft()
            if gen.cancelled:
                self.log_end(gen)
            else:
                self.running.append(gen)
                admitted.append(gen)
        return admitted

    def _step(self) -> None:
        batch, still = len(self.running), []
        for gen in self.running:
            if gen.cancelled:
                continue
            verify = self.spec is not None and bool(gen.words)  # the prefill's token is no verify step
            words = []
            for _ in range(self.spec.draw(self.rng) if verify else 1):
                words.append(gen.next_word(batch, self.faults.loop_above))
                gen.words.append(words[-1])
                gen.finish_reason = gen.ended()
                if gen.finish_reason is not None:
                    break  # the last step commits only what the request may still write
            if verify:
                gen.verify_ct += 1
                gen.correct_drafts[len(words) - 1] += 1
            gen.first_token_ns = gen.first_token_ns or time.monotonic_ns()
            gen.queue.put_nowait("".join(words))  # one item, one SSE event: a step's tokens
            if gen.finish_reason is None:
                still.append(gen)
            else:
                gen.queue.put_nowait(None)
                self.log_end(gen)
        self.running = still


class BadRequest(Exception):
    """A request body this server does not accept: answered 400 with an OpenAI error object."""


def prompt_text(body: dict, chat: bool) -> str:
    """The text the output is a function of: the chat messages' contents joined by newlines, or the prompt."""
    if not chat:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "\n".join(prompt)
        if not isinstance(prompt, str):
            raise BadRequest("'prompt' must be a string")
        return prompt
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    return "\n".join(_content_text(m) for m in messages)


def _content_text(message) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise BadRequest("every message needs a 'content'")
    return content


def max_tokens_of(body: dict, chat: bool) -> int:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return DEFAULT_MAX_TOKENS if chat else 16
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest("'max_tokens' must be a positive integer")
    return value


def count_prompt_tokens(text: str) -> int:
    """ceil(UTF-8 bytes / 4), at least 1."""
    return max(1, math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4))


def error_response(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


class Api:
    """The HTTP side: parses a body, submits it to the engine, writes its tokens as they come."""

    def __init__(self, engine: Engine, model: str, info: dict | None = None):
        self.engine = engine
        self.model = model
        self.info = info  # what GET /server_info answers (--info), or None: no such route
        self.created = int(time.time())

    async def server_info(self, _request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.info), content_type="application/json")

    async def models(self, _request: web.Request) -> web.Response:
        data = [{"id": self.model, "object": "model", "created": self.created, "owned_by": "reference"}]
        return web.json_response({"object": "list", "data": data}, dumps=lambda o: orjson.dumps(o).decode())

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            if body.get("model") not in (None, self.model):
                return error_response(404, f"The model `{body['model']}` does not exist.")
            text = prompt_text(body, chat)
            max_tokens = max_tokens_of(body, chat)
        except orjson.JSONDecodeError:
            return error_response(400, "the body is not JSON")
        except BadRequest as exc:
            return error_response(400, str(exc))
        gen = self.engine.submit(text, count_prompt_tokens(text), max_tokens, body.get("ignore_eos") is True,
                                 request.headers.get("X-Request-Id"))
        shape = Shape(chat, self.model, f"{'chatcmpl' if chat else 'cmpl'}-{gen.call_no}", self.created)
        spec = self.engine.spec if body.get("return_spec_tokens_details") is True else None
        try:
            if body.get("stream"):
                usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
                return await stream(request, gen, shape, bool(usage), spec)
            return await unary(gen, shape, bool(body.get("logprobs")), spec)
        finally:
            gen.cancelled = True  # a client that went away frees its slot at the next step


@dataclass(frozen=True)
class Shape:
    """How one answer is written: the API's object names and the ids every chunk repeats."""

    chat: bool
    model: str
    id: str
    created: int

    def chunk(self, choice: dict) -> bytes:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return b"data: " + orjson.dumps({"id": self.id, "object": obj, "created": self.created,
                                         "model": self.model, "choices": [choice]}) + b"\n\n"

    def text_choice(self, text: str, finish: str | None) -> dict:
        if self.chat:
            return {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}


def usage_of(gen: Generation) -> dict:
    n = len(gen.words)
    return {"prompt_tokens": gen.prompt_tokens, "completion_tokens": n, "total_tokens": gen.prompt_tokens + n}


def spec_details(gen: Generation, spec: Spec) -> dict:
    """SGLang's `sglext.spec_tokens_details` of a finished request (the module's docstring gives each formula)."""
    n, completion = gen.verify_ct, len(gen.words)
    correct = sum(j * h for j, h in enumerate(gen.correct_drafts))
    proposed = n * (spec.draft_cap - 1)
    return {"spec_verify_ct": n, "spec_accept_length": completion / n if n else 0.0,
            "spec_accept_rate": correct / proposed if proposed else 0.0,
            "spec_correct_drafts_histogram": list(gen.correct_drafts), "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed}


async def stream(request: web.Request, gen: Generation, shape: Shape, include_usage: bool,
                 spec: Spec | None = None) -> web.StreamResponse:
    """SSE: a role chunk (chat), one chunk per token (per verify step in speculative mode), a finish chunk, the
    spec details when asked (`spec`), the usage chunk when asked, [DONE]."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    if shape.chat:
        await resp.write(shape.chunk({"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}))
    while (word := await gen.queue.get()) is not None:
        chunks = [shape.chunk(shape.text_choice(word, None))]
        while not gen.queue.empty() and (word := gen.queue.get_nowait()) is not None:
            chunks.append(shape.chunk(shape.text_choice(word, None)))  # one write for the tokens that piled up
        await resp.write(b"".join(chunks))
        if word is None:
            break
    tail = shape.chunk(shape.text_choice("", gen.finish_reason))
    head = {"id": shape.id, "object": "chat.completion.chunk" if shape.chat else "text_completion",
            "created": shape.created, "model": shape.model, "choices": []}
    if spec is not None:
        tail += b"data: " + orjson.dumps(head | {"sglext": {"spec_tokens_details": spec_details(gen, spec)}}) + b"\n\n"
    if include_usage:
        tail += b"data: " + orjson.dumps(head | {"usage": usage_of(gen)}) + b"\n\n"
    await resp.write(tail + b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def unary(gen: Generation, shape: Shape, logprobs: bool, spec: Spec | None = None) -> web.Response:
    """The whole answer once the output is complete; with `logprobs`, its token list; with `spec`, its
    `sglext.spec_tokens_details`."""
    while await gen.queue.get() is not None:
        pass
    text = "".join(gen.words)
    if shape.chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": gen.finish_reason}
        if logprobs:
            choice["logprobs"] = {"content": [{"token": w, "logprob": 0.0, "bytes": list(w.encode()),
                                               "top_logprobs": []} for w in gen.words]}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": gen.finish_reason}
        if logprobs:
            offsets = [0]
            for w in gen.words[:-1]:
                offsets.append(offsets[-1] + len(w))
            choice["logprobs"] = {"tokens": list(gen.words), "token_logprobs": [0.0] * len(gen.words),
                                  "top_logprobs": None, "text_offset": offsets}
    obj = {"id": shape.id, "object": "chat.completion" if shape.chat else "text_completion",
           "created": shape.created, "model": shape.model, "choices": [choice], "usage": usage_of(gen)}
    if spec is not None:
        obj["sglext"] = {"spec_tokens_details": spec_details(gen, spec)}
    return web.Response(body=orjson.dumps(obj), content_type="application/json")


def make_app(engine: Engine, model: str, info: dict | None = None) -> web.Application:
    api = Api(engine, model, info)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/v1/models", api.models)
    app.router.add_get("/health", api.health)
    if info is not None:
        app.router.add_get("/server_info", api.server_info)
    app.router.add_post("/v1/chat/completions", api.chat)
    app.router.add_post("/v1/completions", api.completions)
    return app


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m tests.reference_server", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default=MODEL)
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--step-ms", type=float, default=5.0)
    p.add_argument("--prefill-ms-per-1k-tokens", type=float, default=5.0)
    p.add_argument("--fffd-fraction", type=float, default=0.0)
    p.add_argument("--loop-above", type=int)
    p.add_argument("--pause-once-after", type=int)
    p.add_argument("--pause-s", type=float, default=0.0)
    p.add_argument("--slow-after", type=int)
    p.add_argument("--slow-factor", type=float, default=1.0)
    p.add_argument("--nondeterministic-fraction", type=float, default=0.0)
    p.add_argument("--events", type=Path, help="a JSONL file of the faults and of every finished request")
    p.add_argument("--step-ms-per-slot", type=float, default=0.0, help="ms an iteration adds per running request")
    p.add_argument("--accept-length", type=float, help="speculative mode: mean tokens committed per verify step")
    p.add_argument("--draft-cap", type=int, help="speculative mode: the most tokens one verify step commits")
    p.add_argument("--seed", type=int, default=0, help="seed of the verify steps' draws")
    p.add_argument("--info", action="append", default=[], metavar="KEY=VALUE",
                   help="serve GET /server_info with this key (repeatable; VALUE read as JSON where it parses)")
    args = p.parse_args(argv)
    if args.slots < 1 or args.step_ms <= 0 or args.slow_factor <= 0 or args.pause_s < 0 or args.step_ms_per_slot < 0:
        p.error("--slots must be ≥ 1, --step-ms and --slow-factor > 0, --pause-s and --step-ms-per-slot ≥ 0")
    if (args.accept_length is None) != (args.draft_cap is None):
        p.error("--accept-length and --draft-cap go together")
    if args.draft_cap is not None and not (args.draft_cap >= 1 and 1 <= args.accept_length <= args.draft_cap):
        p.error("speculative mode needs 1 ≤ --accept-length ≤ --draft-cap")
    if any("=" not in item for item in args.info):
        p.error("--info takes KEY=VALUE")
    return args


def info_of(items: list[str]) -> dict | None:
    """--info KEY=VALUE items as /server_info's object (a value that parses as JSON is that value, else the
    string), or None without any."""
    if not items:
        return None
    info = {}
    for item in items:
        key, text = item.split("=", 1)
        try:
            info[key] = orjson.loads(text)
        except orjson.JSONDecodeError:
            info[key] = text
    return info


async def serve(args: argparse.Namespace) -> None:
    faults = Faults(args.fffd_fraction, args.loop_above, args.pause_once_after, args.pause_s, args.slow_after,
                    args.slow_factor, args.nondeterministic_fraction)
    events = open(args.events, "a", buffering=1) if args.events else None  # one line per write: a test reads it live
    spec = None if args.accept_length is None else Spec(args.accept_length, args.draft_cap)
    engine = Engine(args.slots, args.step_ms, args.prefill_ms_per_1k_tokens, faults, events, args.step_ms_per_slot,
                    spec, args.seed)
    runner = web.AppRunner(make_app(engine, args.model, info_of(args.info)), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    sock = socket.create_server((args.host, args.port), backlog=1024)
    await web.SockSite(runner, sock).start()
    engine_task = asyncio.create_task(engine.run())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"{READY} http://{args.host}:{sock.getsockname()[1]}", flush=True)
    await stop.wait()
    engine_task.cancel()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(runner.cleanup(), 2)


def main(argv: list[str] | None = None) -> None:
    asyncio.run(serve(parse_args(sys.argv[1:] if argv is None else argv)))


# --- in tests -------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def start(tmp_path: Path, *flags: str, timeout_s: float = 20.0) -> tuple[str, subprocess.Popen]:
    """The server as a subprocess on a free loopback port: (its URL, its process). Its output goes to
    `tmp_path/reference-server-<ns>.log`; the caller stops it (SIGTERM) or uses `running`."""
    log_path = Path(tmp_path) / f"reference-server-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "tests.reference_server", "--port", "0", *flags],
                                stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if READY in text:
            return text.split(READY, 1)[1].split()[0], proc
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"the reference server did not start: {log_path.read_text(errors='replace')[-500:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running(tmp_path: Path, *flags: str) -> Iterator[str]:
    """`with running(tmp_path, "--slots", "4") as url:` the server for the block, stopped after it."""
    url, proc = start(tmp_path, *flags)
    try:
        yield url
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
