"""Per-cell sums of what the server reported about each request beyond its token counts: prompt tokens served
from its prefix cache, and the draft tokens of speculative decoding (the records' `cached_tokens` and `spec`, as
the engines' adapters read them from each answer: loadgen/engines/, `field_readers`). One function per figure,
the formula in its docstring; "ok" measure-phase records only.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np

from loadgen.metrics.record_table import ABSENT, NONE, RecordTable, or_zero
from loadgen.record import Record

# A cell whose chunks average at most this many tokens is streamed one event per token (llama.cpp does so even
# when a verify step accepts several drafts); above 1 only by events that held back a partial UTF-8 character.
PER_TOKEN_CHUNKS_MAX = 1.1


def cached_tokens(ok: Sequence[Record] | RecordTable) -> int | None:
    """Σ cached_tokens over the ok requests that reported it (usage.prompt_tokens_details.cached_tokens,
    or an engine's own field, `EngineAdapter.response_fields`); None when none reported it."""
    cached = RecordTable.of(ok).ints("cached_tokens")
    reported = cached != NONE
    return int(cached[reported].sum()) if reported.any() else None


def cached_fraction(ok: Sequence[Record] | RecordTable) -> float | None:
    """Σ cached_tokens / Σ prompt_tokens over the ok requests that reported both (a prompt count ≠ 0)."""
    t = RecordTable.of(ok)
    cached, prompt = t.ints("cached_tokens"), t.ints("prompt_tokens")
    both = (cached != NONE) & (prompt != NONE) & (prompt != 0)
    prompt_sum = int(prompt[both].sum())
    return int(cached[both].sum()) / prompt_sum if prompt_sum else None


def _spec_ints(values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """int(value) of a spec key's numbers (truncated), 0 where the key is absent or not a number."""
    counted = (kinds != ABSENT) & np.isfinite(values)
    return np.where(counted, np.trunc(np.where(counted, values, 0.0)), 0.0).astype(np.int64)


def draft_tokens(ok: Sequence[Record] | RecordTable) -> dict | None:
    """llama.cpp's per-request draft counts summed over the cell: {proposed: Σ int(draft_n), accepted:
    Σ int(draft_n_accepted or 0), accept_rate: accepted / proposed, requests}, over the requests whose spec
    holds a number as draft_n; None when no request carried one.

    An accept *length* needs the number of verify steps, which llama.cpp's per-request counts do not give (the
    server's counters and its log do), so this is a cross-check of their accepted and proposed tokens."""
    t = RecordTable.of(ok)
    proposed_values, proposed_kinds = t.spec_numbers("draft_n")
    carried = (proposed_kinds != ABSENT) & np.isfinite(proposed_values)
    if not carried.any():
        return None
    proposed = int(_spec_ints(proposed_values, proposed_kinds)[carried].sum())
    accepted = int(_spec_ints(*t.spec_numbers("draft_n_accepted"))[carried].sum())
    return {"proposed": proposed, "accepted": accepted, "accept_rate": accepted / proposed if proposed else None,
            "requests": int(carried.sum())}


def _multi_chunk(t: RecordTable) -> np.ndarray:
    """The rows with ≥ 2 chunks and a completion count ≠ 0 (None counted as 0)."""
    return (t.ints("chunks") >= 2) & (or_zero(t.ints("completion_tokens")) != 0)


def per_token_counts(ok: Sequence[Record] | RecordTable) -> tuple[int, bool]:
    """(how many ok records with ≥ 2 chunks carry per-chunk counts, whether every count of theirs is ≤ 1).

    Reads the records' per-chunk lists: a cell that moved them out has their `ChunkFold`'s counts instead."""
    t = RecordTable.of(ok)
    counted = [c for c in t.where(_multi_chunk(t)).labels("chunk_tokens").tolist() if c]
    every = np.fromiter(chain.from_iterable(counted), dtype=np.int64)
    return len(counted), bool(every.size == 0 or every.max() <= 1)


def one_event_per_token(ok: Sequence[Record] | RecordTable, counts: tuple[int, bool] | None = None) -> bool:
    """True when the server streamed (about) one content event per token: Σ completion_tokens / Σ chunks ≤
    PER_TOKEN_CHUNKS_MAX over ok requests with ≥ 2 chunks, or every running per-chunk count is ≤ 1
    (`per_token_counts`, of the records or as a `ChunkFold` summed them)."""
    t = RecordTable.of(ok)
    multi = _multi_chunk(t)
    if not multi.any():
        return False
    counted, per_token = counts if counts is not None else per_token_counts(t.where(multi))
    if counted and per_token:
        return True
    tokens = int(or_zero(t.ints("completion_tokens"))[multi].sum())
    return tokens / int(t.ints("chunks")[multi].sum()) <= PER_TOKEN_CHUNKS_MAX
