"""The simulator's scheduler: continuous batching of verify steps on one asyncio task.

Each step admits waiting requests (up to `max_running`), prefills the new ones (each gets its first token)
and runs one verify step for the others (each commits k tokens, k drawn from the accept-length model).
Steps are paced on an absolute clock (no drift), scaled by `speed`. Every emission goes to the request's
queue; the HTTP handler writes it and stamps the truth.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.aio import cancel_and_wait
from loadgen.sim.model import Roofline, SpecConfig, draw_accept, mean_accept_length
from loadgen.sim.outputs import Output, OutputFaults, prompt_seed
from loadgen.sim.prompt_kind import FACTORS, kind_accept_mean


@dataclass(eq=False)
class SimRequest:
    rid: str
    prompt_tokens: int | None  # None until the engine counts it at admission (`count_prompt`)
    max_tokens: int
    t_arrival_ns: int
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: int = 0
    verify_ct: int = 0
    started: bool = False
    aborted: bool = False
    t_admitted_ns: int | None = None  # left the waiting queue (sglang:queue_time_seconds)
    kind: str = "code"  # the prompt's kind (`prompt_kind`): how well the drafter predicts its answer
    prompt: object = None  # the messages or text as received, for the truth
    count_prompt: Callable[[], int] | None = None  # deferred tokenization (see Generations.prompt_size)
    cached_tokens: int = 0  # prompt tokens the prefix cache served (the llama.cpp imitation has one)
    reasoning_chunks: int = 0  # content chunks streamed as reasoning (--reasoning-tokens): the first ones
    # [j] = verify steps that accepted j drafts; as long as the draft's positions (Engine.submit sets it)
    correct_drafts: list[int] = field(default_factory=list)
    output: Output | None = None  # the tokens produced so far (sim/outputs.py), made at the first one

    def tokens(self, start: int, k: int) -> list[int]:
        """Output tokens start..start+k-1 (all produced by the time a route writes them)."""
        return self.output.tokens[start:start + k] if self.output is not None else []

    @property
    def finished(self) -> bool:
        return self.generated >= self.max_tokens


@dataclass
class WindowStats:
    """SGLang's scheduler gauges are means over the last `decode_log_interval` decode steps."""

    steps: int = 0
    accepted: int = 0
    batch_sum: int = 0
    t0_ns: int = 0


class Engine:
    def __init__(self, spec: SpecConfig, roofline: Roofline | None = None, speed: float = 1.0,
                 max_running: int = 256, seed: int = 0, decode_log_interval: int = 40,
                 on_utilization: Callable[[float], None] | None = None,
                 output_faults: OutputFaults | None = None):
        self.spec = spec
        self.roofline = roofline or Roofline()
        self.speed = speed
        self.max_running = max_running
        self.rng = random.Random(seed)
        self.accept_mean = mean_accept_length(spec)
        # tokens one verify step commits at most: SGLang's per-request histogram has this many entries
        self.draft_positions = max(1, min(spec.block_size, spec.budget + 1))
        self.kind_means = {kind: kind_accept_mean(self.accept_mean, kind) for kind in FACTORS}
        self.decode_log_interval = decode_log_interval
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        # (engine, batch, accepted_tokens, verify_reqs) after each step
        self.step_listeners: list[Callable[["Engine", int, int, int], None]] = []
        self.window_listeners: list[Callable[["Engine", WindowStats], None]] = []  # at each decode-log refresh
        self.on_utilization = on_utilization  # GPU busy fraction (see `utilization`) whenever the batch changes
        self.output_faults = output_faults or OutputFaults()  # garbage or drift under batching (sim/outputs.py)
        # SGLang's tokenizer-side counters (their /metrics names are in sglang_metrics)
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_requests_total = 0
        self.spec_verify_calls_total = 0
        self.num_aborted_requests_total = 0
        self.steps_by_tokens: Counter[int] = Counter()  # verify steps that committed k tokens (k − 1 drafts accepted)
        self.window = WindowStats()
        self.gauge_accept_length = 0.0
        self.gauge_gen_throughput = 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def submit(self, req: SimRequest) -> None:
        if not req.correct_drafts:
            req.correct_drafts = [0] * self.draft_positions
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        """The client went away: the request stops generating at its next step (counted once, unless it had
        already produced every token)."""
        if not req.aborted and not req.finished:
            self.num_aborted_requests_total += 1
        req.aborted = True

    async def _run(self) -> None:
        next_ns = time.monotonic_ns()
        while True:
            self.running = [r for r in self.running if not r.aborted and not r.finished]
            while self.waiting and len(self.running) < self.max_running:
                req = self.waiting.popleft()
                if req.count_prompt is not None:
                    req.prompt_tokens, req.count_prompt = req.count_prompt(), None
                if not req.aborted:
                    req.t_admitted_ns = time.monotonic_ns()
                    self.running.append(req)
            if not self.running:
                self._set_utilization(0.0)
                self._wake.clear()
                await self._wake.wait()
                next_ns = time.monotonic_ns()
                continue
            new = [r for r in self.running if not r.started]
            decoding = [r for r in self.running if r.started]
            prefill_tokens = sum((r.prompt_tokens or 0) - r.cached_tokens for r in new)  # a prefix cache's share is free
            step_s = self.roofline.step_s(len(self.running), prefill_tokens, self.spec) / self.speed
            self._set_utilization(self.utilization(len(self.running)))
            next_ns += int(step_s * 1e9)
            delay = (next_ns - time.monotonic_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                next_ns = time.monotonic_ns()
            self._step(new, decoding)

    def _step(self, new: list[SimRequest], decoding: list[SimRequest]) -> None:
        accepted = 0
        running = len(new) + len(decoding)
        for r in new:
            r.started = True
            self._emit(r, 1, running)
        for r in decoding:
            if r.aborted:
                continue
            k = min(draw_accept(self.rng, self.spec, self.kind_means[r.kind]), r.max_tokens - r.generated)
            r.verify_ct += 1
            self.steps_by_tokens[k] += 1
            r.correct_drafts[k - 1] += 1
            accepted += k
            self._emit(r, k, running)
        if decoding:
            w = self.window
            if w.steps == 0:
                w.t0_ns = time.monotonic_ns()
            w.steps += 1
            w.accepted += accepted
            w.batch_sum += len(decoding)
            if w.steps >= self.decode_log_interval:
                self.gauge_accept_length = w.accepted / w.batch_sum
                dt = (time.monotonic_ns() - w.t0_ns) / 1e9
                self.gauge_gen_throughput = w.accepted / dt if dt > 0 else 0.0
                for fn in self.window_listeners:
                    fn(self, w)
                self.window = WindowStats()
        for on_step in self.step_listeners:
            on_step(self, len(new) + len(decoding), accepted, len(decoding))

    def _emit(self, r: SimRequest, k: int, running: int) -> None:
        if r.output is None:
            r.output = Output(prompt_seed(r.prompt), [])
        r.output.extend(k, running, self.output_faults)
        r.generated += k
        if r.finished:
            # SGLang's tokenizer-side counters move when a request completes, not per step
            self.generation_tokens_total += r.generated
            self.prompt_tokens_total += r.prompt_tokens or 0
            self.num_requests_total += 1
            self.spec_verify_calls_total += r.verify_ct
        r.queue.put_nowait(k)

    def accepted_at_position(self, positions: int) -> list[int]:
        """Verify steps whose draft token at position i (from 0) was accepted, for i < `positions`: a step that
        committed k tokens accepted its first k − 1 drafts, so position i counts the steps with k ≥ i + 2."""
        return [sum(n for k, n in self.steps_by_tokens.items() if k >= i + 2) for i in range(positions)]

    def utilization(self, batch: int) -> float:
        """GPU busy fraction while `batch` requests run: 0.55 + 0.45·min(1, batch·(budget+1)/(128·9)).

        Memory-bandwidth-bound decoding keeps the GPUs far from their limit (the published deployment drew
        ~450 W of 1100 W at concurrency 128, budget 8); a wider verify tree does more work per step."""
        return 0.55 + 0.45 * min(1.0, batch * (self.spec.budget + 1) / (128 * 9))

    def _set_utilization(self, u: float) -> None:
        if self.on_utilization:
            self.on_utilization(u)
