"""Prompts of an exact token length, counted by the server's own tokenizer.

`fit_prompts` cuts each body so that `prefix + body[:L]` counts exactly the target number of tokens;
`chars_for` says how many characters of text a window needs before it is fitted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

CountTokens = Callable[[list[str]], Awaitable[list[int]]]
PAD = " ."  # usually one token; the first of the endings tried when a cut falls short
# Endings tried after a cut that falls short (the longest cut with count ≤ target, when one more character
# jumps past it). More than one: where the server counts the whole chat request, the prompt's last characters
# may merge with the template's next ones ("… .<|im_end|>"), and then " ." may add no token or two.
PADS = (PAD, " a", " the", "\n", ".", " x", ",", " 0")
# ... after the cut itself or after it less a few characters (a cut after a space or inside a word changes how
# the ending joins it)
BACK_CHARS = (0, 1, 2, 3, 5, 8)
PAD_ROUNDS = 8


async def fit_prompts(prefixes: list[str], bodies: list[str], targets: list[int],
                      count_tokens: CountTokens, rounds: int = 24) -> tuple[list[str], list[int]]:
    """Cut each `prefix + body[:L]` so it counts exactly `target` tokens by the server's own tokenizer.

    Binary search on L for every prompt in lockstep (one batched tokenize call per round). Tokenizers are
    monotone in practice when characters are appended; where a cut jumps from target−1 to target+1 tokens,
    the shorter cut is given one of the endings in `PADS` (the first whose count is the target). Returns the
    texts and their counts (a count may differ from the target only when the body is too short, or, by the
    few tokens no ending could add, fall short of it; it never exceeds it).
    """
    cuts, counts = await _longest_cuts(prefixes, bodies, targets, count_tokens, rounds)
    texts = [p + b[:cut] for p, b, cut in zip(prefixes, bodies, cuts)]
    can_grow = [cut < len(b) for b, cut in zip(bodies, cuts)]
    await _pad(texts, counts, targets, can_grow, count_tokens, [len(p) for p in prefixes])
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
               count_tokens: CountTokens, keep: list[int]) -> None:
    """Extend each text still short of its target (in place): per round, the text less `BACK_CHARS` characters,
    then k − 1 `PAD`s and each ending of `PADS` are tried (k = tokens missing), and the trial with the
    highest count that does not pass the target is kept."""
    for _ in range(PAD_ROUNDS):
        short = [i for i in range(len(texts)) if counts[i] < targets[i] and can_grow[i]]
        if not short:
            return
        trials = [(i, texts[i][: len(texts[i]) - back] + PAD * (targets[i] - counts[i] - 1) + end)
                  for i in short for back in BACK_CHARS if len(texts[i]) - back >= keep[i] for end in PADS]
        progressed = False
        for (i, text), c in zip(trials, await count_tokens([t for _, t in trials])):
            if counts[i] < c <= targets[i]:
                texts[i], counts[i], progressed = text, c, True
        if not progressed:
            return


def chars_for(tokens: int, chars_per_token: float = 4.0) -> int:
    """A generous window: enough characters to hold `tokens` tokens of code/prose (≈3–4 chars/token)."""
    return int(tokens * chars_per_token * 2) + 256
