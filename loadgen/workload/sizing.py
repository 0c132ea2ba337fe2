"""Prompts of an exact token length, counted by the server's own tokenizer.

`fit_prompts` cuts each body so that `prefix + body[:L]` counts exactly the target number of tokens;
`chars_for` says how many characters of text a window needs before it is fitted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

CountTokens = Callable[[list[str]], Awaitable[list[int]]]
PAD = " ."  # taken as one token: an overshoot of k tokens is trimmed by k * len(PAD) characters
PAD_ROUNDS = 8


async def fit_prompts(prefixes: list[str], bodies: list[str], targets: list[int],
                      count_tokens: CountTokens, rounds: int = 24) -> tuple[list[str], list[int]]:
    """Cut each `prefix + body[:L]` so it counts exactly `target` tokens by the server's own tokenizer.

    Binary search on L for every prompt in lockstep (one batched tokenize call per round). Tokenizers are
    monotone in practice when characters are appended; where a cut jumps from target−1 to target+1 tokens,
    the shorter cut is padded with `PAD` until it matches. Returns the texts and their counts (a count may
    differ from the target only when the body is too short).
    """
    cuts, counts = await _longest_cuts(prefixes, bodies, targets, count_tokens, rounds)
    texts = [p + b[:cut] for p, b, cut in zip(prefixes, bodies, cuts)]
    can_grow = [cut < len(b) for b, cut in zip(bodies, cuts)]
    await _pad(texts, counts, targets, can_grow, count_tokens)
    return texts, await count_tokens(texts)


async def _longest_cuts(prefixes: list[str], bodies: list[str], targets: list[int], count_tokens: CountTokens,
                        rounds: int) -> tuple[list[int], list[int]]:
    """Per prompt, the longest L found with count(prefix + body[:L]) ≤ target, and that count."""
    n = len(bodies)
    lo, hi = [0] * n, [len(b) for b in bodies]
    best, best_count = [0] * n, [0] * n
    for _ in range(rounds):
        active = [i for i in range(n) if lo[i] <= hi[i]]
        if not active:
            break
        mids = [(lo[i] + hi[i]) // 2 for i in active]
        counts = await count_tokens([prefixes[i] + bodies[i][:m] for i, m in zip(active, mids)])
        for i, m, c in zip(active, mids, counts):
            if c > targets[i]:
                hi[i] = m - 1
                continue
            if m >= best[i]:
                best[i], best_count[i] = m, c
            lo[i] = m + 1
    return best, best_count


async def _pad(texts: list[str], counts: list[int], targets: list[int], can_grow: list[bool],
               count_tokens: CountTokens) -> None:
    """Append `PAD` to each text still short of its target (in place), trimming back any overshoot."""
    for _ in range(PAD_ROUNDS):
        short = [i for i in range(len(texts)) if counts[i] < targets[i] and can_grow[i]]
        if not short:
            return
        for i in short:
            texts[i] += PAD * (targets[i] - counts[i])
        for i, c in zip(short, await count_tokens([texts[i] for i in short])):
            if c > targets[i]:
                texts[i] = texts[i][: len(texts[i]) - len(PAD) * (c - targets[i])]
            counts[i] = min(c, targets[i])


def chars_for(tokens: int, chars_per_token: float = 4.0) -> int:
    """A generous window: enough characters to hold `tokens` tokens of code/prose (≈3–4 chars/token)."""
    return int(tokens * chars_per_token * 2) + 256
