"""Performance model of a DDTree deployment: accept length and batch step time (pure functions).

Calibrated to published figures (8× B300, Kimi K2.6 INT4 MoE, TP8): budget 8 / top-k 4 → accept length
3.5–4.1, 303 tok/s at concurrency 1 and 4723 tok/s at 128; budget 16 → accept 5.3–6.4.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class SpecConfig:
    budget: int = 8
    topk: int = 4
    block_size: int = 16
    algorithm: str = "DDTREE"


def mean_accept_length(cfg: SpecConfig) -> float:
    """Mean tokens committed per verify step (accepted drafts + the bonus token).

    a = 1 + (m − 1)·(1 − exp(−budget/38.5))·(1 + 0.04·log2(topk/4)), capped at m = min(block_size, budget+1):
    it grows with the tree budget and saturates at the drafter's block size.
    """
    cap = min(cfg.block_size, cfg.budget + 1)
    if cfg.algorithm.upper() == "NONE" or cap <= 1:
        return 1.0
    topk_gain = 1.0 + 0.04 * math.log2(max(cfg.topk, 1) / 4.0)
    a = 1.0 + (15.0) * (1.0 - math.exp(-cfg.budget / 38.5)) * topk_gain
    return max(1.0, min(a, float(cap)))


def draw_accept(rng: random.Random, cfg: SpecConfig, mean: float) -> int:
    """One verify step's committed tokens: 1 + Binomial(cap−1, (mean−1)/(cap−1)); its mean is exactly `mean`."""
    cap = min(cfg.block_size, cfg.budget + 1)
    if cap <= 1:
        return 1
    p = (mean - 1.0) / (cap - 1)
    return 1 + sum(1 for _ in range(cap - 1) if rng.random() < p)


@dataclass(frozen=True)
class Roofline:
    """Step time of one batched verify step, in seconds at speed 1.

    t_step = base_s + batch·per_req_s·(budget+1)/9 + prefill_tokens·prefill_s_per_token
    (budget 8 → 11 ms + 0.72 ms per running request: 303 tok/s at c=1, ≈4700 tok/s at c=128).
    """

    base_s: float = 0.0110
    per_req_s: float = 0.00072
    prefill_s_per_token: float = 0.00002

    def step_s(self, batch: int, prefill_tokens: int, cfg: SpecConfig) -> float:
        return (self.base_s + batch * self.per_req_s * (cfg.budget + 1) / 9.0
                + prefill_tokens * self.prefill_s_per_token)
