"""The reference server's true speeds in speculative mode (tests/reference_server.py), pure functions.

A configuration is a verify step's mean tokens A (`--accept-length`), its most tokens K (`--draft-cap`), the
iteration's fixed ms S (`--step-ms`) and its ms per running request X (`--step-ms-per-slot`).

`formula_tok_s` is the steady state with every slot decoding: c requests each commit A tokens per iteration of
S + X·c ms, so c·A / (S + X·c) × 1000 output tok/s. It leaves out what a closed loop of requests of M tokens
adds to each request's life: the iteration that prefills it (one token, not A, and its prefill ms), the last
verify step cut to what the request may still write (fewer than A tokens on average), and, with c > 1, the
iteration its slot stands empty (a request that ends at a step's end is replaced by one that arrives after the
next iteration has admitted its batch). Measured (loadgen, 16 requests at c = 1, 96 at c = 32, 60-token prompts,
S = 10 ms; c = 32 read in the steady window), it is above a run's output tok/s by 7.0-12.7 % at c = 1 and
8.7-16.4 % at c = 32 for A = 6, K = 8, X = 1 (M = 128 … 64), 3.5-6.3 % and 5.5-10.7 % for A = 3, K = 4, X = 0.2,
3.2-4.5 % and 1.9-5.7 % for A = 2, K = 4, X = 1: a gap that differs between configurations by more than a
margin's interval, so a margin between two of them is not read from it.

`closed_loop_tok_s` counts those three: by renewal-reward, a slot's cycle is L = 1 + E[N] (+ 1 with c > 1)
iterations for M tokens, where E[N] is the mean verify steps to commit M − 1 tokens with the last step cut
(`verify_steps_mean`, exact over the binomial draws); a slot is busy 1 + E[N] of them, so the mean iteration
lasts S + X·c·(1 + E[N])/L + P·c/L ms (P the prefill ms of one request) and the output is c·M / (L × that)
× 1000 tok/s. At c = 1 the engine idles between requests instead of running an empty iteration: a cycle is
(S + X + P) + E[N]·(S + X) ms. It leaves out the client's turnaround (about 1 ms a request at c = 1; within
the empty iteration at c > 1 as long as it is shorter) and a cell's ramps (its first wave admitted at once, its
last draining): read it against a cell's steady window. Measured as above, a run is 1.0-2.1 % below it at c = 1
(per request: its prefill iteration ~1.5 ms past the nominal, a timer woken after an idle engine; ~1 ms idle,
the client's turnaround; the sample's verify steps) and 0.6-2.8 % below (+0.1 % once) at c = 32 in the steady
window; the whole window, ramps included, is 0.6-6.1 % below, most where S outweighs X·c (a draining batch still
pays S per iteration). `lone_tok_s` takes the c = 1 overheads as a server measured them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class SpecServer:
    """One reference-server configuration in speculative mode, and the flags that start it."""

    accept_length: float  # A
    draft_cap: int  # K
    step_ms: float  # S
    step_ms_per_slot: float  # X
    prefill_ms_per_1k_tokens: float = 5.0

    def flags(self) -> tuple[str, ...]:
        return ("--accept-length", str(self.accept_length), "--draft-cap", str(self.draft_cap),
                "--step-ms", str(self.step_ms), "--step-ms-per-slot", str(self.step_ms_per_slot),
                "--prefill-ms-per-1k-tokens", str(self.prefill_ms_per_1k_tokens))


def formula_tok_s(cfg: SpecServer, concurrency: int) -> float:
    """c·A / (S + X·c) × 1000: every slot decoding, every iteration a verify step of A tokens."""
    c = concurrency
    return c * cfg.accept_length / (cfg.step_ms + cfg.step_ms_per_slot * c) * 1000


def step_tokens(cfg: SpecServer) -> list[float]:
    """P(a verify step commits k tokens) for k = 1 … K: 1 + Binomial(K − 1, (A − 1)/(K − 1))."""
    n = cfg.draft_cap - 1
    if n == 0:
        return [1.0]
    p = (cfg.accept_length - 1) / n
    return [math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(n + 1)]


def verify_steps_mean(cfg: SpecServer, tokens: int) -> float:
    """E[verify steps to commit `tokens` tokens], each step's draw cut to what is left:
    E[0] = 0, E[t] = 1 + Σ_k P(k)·E[max(0, t − k)]."""
    probs = step_tokens(cfg)

    @cache
    def mean(t: int) -> float:
        return 0.0 if t <= 0 else 1.0 + sum(p * mean(t - k) for k, p in enumerate(probs, start=1))

    for t in range(tokens + 1):  # bottom up: no deep recursion
        mean(t)
    return mean(tokens)


def closed_loop_tok_s(cfg: SpecServer, concurrency: int, max_tokens: int, prompt_tokens: int) -> float:
    """Output tok/s of a closed loop of `concurrency` requests of `max_tokens` tokens (the module's docstring)."""
    c, s, x = concurrency, cfg.step_ms, cfg.step_ms_per_slot
    n = verify_steps_mean(cfg, max_tokens - 1)
    prefill_ms = cfg.prefill_ms_per_1k_tokens * prompt_tokens / 1000
    if c == 1:
        return lone_tok_s(cfg, max_tokens, s + x + prefill_ms, s + x, 0.0)
    cycle = n + 2
    iteration_ms = s + x * c * (n + 1) / cycle + prefill_ms * c / cycle
    return c * max_tokens / (cycle * iteration_ms) * 1000


def accept_length_mean(cfg: SpecServer, max_tokens: int) -> float:
    """Σ completion / Σ verify steps over requests of `max_tokens` tokens: M / E[N] (the prefill's token counted,
    as SGLang's `spec_accept_length` counts it), a little below A."""
    return max_tokens / verify_steps_mean(cfg, max_tokens - 1)


def lone_tok_s(cfg: SpecServer, max_tokens: int, first_ms: float, step_ms: float, idle_ms: float) -> float:
    """Output tok/s at c = 1 given what each request's life costs: its prefill iteration (`first_ms`, received →
    first token), E[N] verify iterations of `step_ms` each, and `idle_ms` before the next request arrives (the
    client's turnaround): M / (first + E[N]·step + idle) × 1000. With the nominal S + X + P, S + X and 0 it is
    `closed_loop_tok_s` at c = 1; with the means a server measured (its `--events` stamps), it is that server's
    expected speed with the overheads the run met (timers that wake late, a client that takes a ms to send the
    next request), only the draws taken at their mean: what a margin's interval, a bootstrap over the requests,
    is to cover."""
    return max_tokens / (first_ms + verify_steps_mean(cfg, max_tokens - 1) * step_ms + idle_ms) * 1000
