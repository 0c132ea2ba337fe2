"""Cell figures from records. One small function per metric; the formula is in its docstring.

All inputs are measure-phase records; "ok" records only, except for the request counts. Times in records
are integer ns; every figure here is in seconds (or tokens per second).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from loadgen.record import OUTCOMES, Record
from loadgen.stats import distribution, mean, percentile, weighted_distribution

NS = 1e9


def measured_window_s(recs: Sequence[Record]) -> float:
    """Window = max(t_end) − min(t_sent) over the measured requests (all outcomes), in seconds."""
    if not recs:
        return 0.0
    return (max(r.t_end_ns for r in recs) - min(r.t_sent_ns for r in recs)) / NS


def output_tokens(ok: Sequence[Record]) -> int:
    """Σ completion_tokens of the ok requests (the server's usage counts)."""
    return sum(r.completion_tokens or 0 for r in ok)


def output_tok_s(ok: Sequence[Record], window_s: float) -> float | None:
    """Aggregate output throughput = Σ completion_tokens(ok) / measured window."""
    return output_tokens(ok) / window_s if window_s > 0 else None


def request_tok_s(r: Record) -> float | None:
    """Per-request decode rate = (completion_tokens − 1) / (t_last_token − t_first_token).

    The first token is excluded because its time is TTFT (prefill), not decoding."""
    if not r.completion_tokens or r.completion_tokens < 2 or r.t_first_token_ns is None or not r.t_last_token_ns:
        return None
    dt = (r.t_last_token_ns - r.t_first_token_ns) / NS
    return (r.completion_tokens - 1) / dt if dt > 0 else None


def ttft_s(r: Record) -> float | None:
    """Time to first token = t_first_token − t_sent (first chunk carrying content, not the first byte)."""
    return (r.t_first_token_ns - r.t_sent_ns) / NS if r.t_first_token_ns is not None else None


def ttft_from_intended_s(r: Record) -> float | None:
    """TTFT from the intended send time = t_first_token − t_intended (includes client queueing)."""
    return (r.t_first_token_ns - r.t_intended_ns) / NS if r.t_first_token_ns is not None else None


def e2e_s(r: Record) -> float:
    """End-to-end latency = t_end − t_sent."""
    return (r.t_end_ns - r.t_sent_ns) / NS


def e2e_from_intended_s(r: Record) -> float:
    """End-to-end latency from the intended send time = t_end − t_intended."""
    return (r.t_end_ns - r.t_intended_ns) / NS


def tpot_s(r: Record) -> float | None:
    """Time per output token after the first = (t_last_token − t_first_token) / (completion_tokens − 1)."""
    rate = request_tok_s(r)
    return 1.0 / rate if rate else None


def prefill_tok_s(r: Record) -> float | None:
    """Prompt-processing rate = prompt_tokens / TTFT (includes queueing and network: a lower bound)."""
    t = ttft_s(r)
    return r.prompt_tokens / t if r.prompt_tokens and t and t > 0 else None


def itl_pairs(r: Record) -> tuple[list[float], list[int]]:
    """Per-token ITL as (value, weight) pairs: chunk i+1 after gap g carries n tokens → value g/n, weight n.

    Without per-chunk counts every chunk counts as one token (an estimate; see `tokens_per_chunk`)."""
    gaps = r.chunk_gaps_ns
    if r.chunk_tokens is None:
        return [g / NS for g in gaps], [1] * len(gaps)
    values, weights = [], []
    for g, n in zip(gaps, r.chunk_tokens[1:]):
        if n > 0:
            values.append(g / NS / n)
            weights.append(n)
    return values, weights


def tokens_per_chunk(ok: Sequence[Record]) -> float | None:
    """Mean tokens per content chunk = Σ completion_tokens / Σ chunks (token-weighted, over ok requests).

    With speculative decoding one chunk is one verify step, so this is the client's estimate of accept
    length (it counts the prefill token's chunk too, so it reads slightly low)."""
    chunks = sum(r.chunks for r in ok)
    return output_tokens(ok) / chunks if chunks else None


def accept_length_chunks(ok: Sequence[Record]) -> float | None:
    """Client estimate of accept length = Σ completion_tokens / Σ (chunks − 1), over ok requests with ≥ 2 chunks.

    The first content chunk is the prefill's single token; every later chunk is one verify step, so
    chunks − 1 estimates the server's verify count (exact when the server streams every step; it reads high
    when the server merges steps into one chunk, e.g. stream_interval > 1), and the ratio is comparable with Σcompletion/Σverify."""
    multi = [r for r in ok if r.chunks >= 2 and r.completion_tokens]
    steps = sum(r.chunks - 1 for r in multi)
    return sum(r.completion_tokens for r in multi) / steps if steps else None


def accept_length_per_request(ok: Sequence[Record]) -> float | None:
    """Server per-request accept length, verify-weighted = Σ completion_tokens / Σ spec_verify_ct
    (not a mean of per-request means)."""
    verify = sum(int(r.spec["spec_verify_ct"]) for r in ok if r.spec and r.spec.get("spec_verify_ct"))
    tokens = sum(r.completion_tokens or 0 for r in ok if r.spec and r.spec.get("spec_verify_ct"))
    return tokens / verify if verify else None


def summarize(recs: Sequence[Record]) -> dict:
    """The cell's client-side figures (DESIGN.md §4), from its measure-phase records."""
    ok = [r for r in recs if r.ok]
    by_outcome = Counter(r.outcome for r in recs)
    window = measured_window_s(recs)
    itl_v: list[float] = []
    itl_w: list[int] = []
    for r in ok:
        v, w = itl_pairs(r)
        itl_v += v
        itl_w += w
    rates = [x for x in (request_tok_s(r) for r in ok) if x is not None]
    ttfts = [x for x in (ttft_s(r) for r in ok) if x is not None]
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    lateness = [(r.t_sent_ns - r.t_intended_ns) / NS for r in recs]
    return {
        "prompt_tokens_mean": mean(prompt),
        "prompt_tokens_min": min(prompt) if prompt else None,
        "prompt_tokens_max": max(prompt) if prompt else None,
        "duration_s": window,
        "requests": {"ok": len(ok), "failed": len(recs) - len(ok),
                     "by_outcome": {o: by_outcome[o] for o in OUTCOMES if by_outcome[o]}},
        "output_tokens": output_tokens(ok),
        "output_tok_s": output_tok_s(ok, window),
        "request_tok_s": {"mean": mean(rates), "p10": percentile(rates, 10), "p50": percentile(rates, 50),
                          "p90": percentile(rates, 90)},
        "ttft_s": distribution(ttfts),
        "ttft_from_intended_s": distribution([x for x in (ttft_from_intended_s(r) for r in ok) if x is not None]),
        "tpot_s": distribution([x for x in (tpot_s(r) for r in ok) if x is not None]),
        "itl_s": weighted_distribution(itl_v, itl_w),
        "e2e_s": distribution([e2e_s(r) for r in ok]),
        "e2e_from_intended_s": distribution([e2e_from_intended_s(r) for r in ok]),
        "prefill_tok_s": mean([x for x in (prefill_tok_s(r) for r in ok) if x is not None]),
        "tokens_per_chunk_mean": tokens_per_chunk(ok),
        "accept_length_per_request": accept_length_per_request(ok),
        "accept_length_chunks": accept_length_chunks(ok),
        "send_lateness_s": distribution(lateness, (50, 99)) | {"max": max(lateness) if lateness else None},
        "achieved_concurrency": (sum(e2e_s(r) for r in recs) / window) if window > 0 else None,
    }
