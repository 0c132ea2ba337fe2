"""Per-cell sums of what the server reported about each request beyond its token counts: prompt tokens served
from its prefix cache, and the draft tokens of speculative decoding (llama.cpp's `timings`). One function
per figure, the formula in its docstring; "ok" measure-phase records only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from loadgen.record import Record

# A cell whose chunks average at most this many tokens is streamed one event per token (llama.cpp does so even
# when a verify step accepts several drafts); above 1 only by events that held back a partial UTF-8 character.
PER_TOKEN_CHUNKS_MAX = 1.1


def cached_tokens(ok: Sequence[Record]) -> int | None:
    """Σ cached_tokens over the ok requests that reported it (usage.prompt_tokens_details.cached_tokens,
    llama.cpp's timings.cache_n, /generate meta_info.cached_tokens); None when none reported it."""
    values = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    return sum(values) if values else None


def cached_fraction(ok: Sequence[Record]) -> float | None:
    """Σ cached_tokens / Σ prompt_tokens over the ok requests that reported both."""
    both = [(r.cached_tokens, r.prompt_tokens) for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(p for _, p in both)
    return sum(c for c, _ in both) / prompt if prompt else None


def draft_tokens(ok: Sequence[Record]) -> dict | None:
    """llama.cpp's per-request draft counts summed over the cell: {proposed: Σ draft_n, accepted:
    Σ draft_n_accepted, accept_rate: accepted / proposed, requests}; None when no request carried them.

    An accept *length* needs the number of verify steps, which the per-request timings do not give (the
    server's counters and its log do), so this is a cross-check of their accepted and proposed tokens."""
    spec = [r.spec for r in ok if r.spec and r.spec.get("draft_n") is not None]
    if not spec:
        return None
    proposed = sum(int(s["draft_n"]) for s in spec)
    accepted = sum(int(s.get("draft_n_accepted") or 0) for s in spec)
    return {"proposed": proposed, "accepted": accepted, "accept_rate": accepted / proposed if proposed else None,
            "requests": len(spec)}


def per_token_counts(ok: Iterable[Record]) -> tuple[int, bool]:
    """(how many ok records with ≥ 2 chunks carry per-chunk counts, whether every count of theirs is ≤ 1)."""
    counted = [r.chunk_tokens for r in ok if r.chunks >= 2 and r.completion_tokens and r.chunk_tokens]
    return len(counted), all(max(c) <= 1 for c in counted)


def one_event_per_token(ok: Sequence[Record], counts: tuple[int, bool] | None = None) -> bool:
    """True when the server streamed (about) one content event per token: Σ completion_tokens / Σ chunks ≤
    PER_TOKEN_CHUNKS_MAX over ok requests with ≥ 2 chunks, or every running per-chunk count is ≤ 1
    (`per_token_counts`, of the records or as a `ChunkFold` summed them)."""
    multi = [r for r in ok if r.chunks >= 2 and r.completion_tokens]
    if not multi:
        return False
    counted, per_token = counts if counts is not None else per_token_counts(multi)
    if counted and per_token:
        return True
    return sum(r.completion_tokens or 0 for r in multi) / sum(r.chunks for r in multi) <= PER_TOKEN_CHUNKS_MAX
