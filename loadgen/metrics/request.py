"""Per-request figures from one `Record`: one function per figure, the formula in its docstring.

The cell summary (`loadgen.metrics.cell`) and the live exporter (`exporters/live.py`) both read them from
here, so a figure means the same in the results file and on the dashboard. Record times are integer ns on
the monotonic clock; every figure here is in seconds (or tokens per second).
"""

from __future__ import annotations

import numpy as np

from loadgen.record import Record

NS = 1e9


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


def send_lateness_s(r: Record) -> float | None:
    """Client queueing = max(0, t_sent − t_intended); None for a request never sent (t_sent = 0).

    No scheduler sends before the due time, so the max only guards the live histogram, whose `_sum` must
    never go down (Prometheus would read a counter reset)."""
    if not r.t_sent_ns or not r.t_intended_ns:
        return None
    return max(0, r.t_sent_ns - r.t_intended_ns) / NS


def request_tok_s(r: Record) -> float | None:
    """Per-request decode rate = (completion_tokens − 1) / (t_last_token − t_first_token), tokens/s.

    The first token is excluded because its time is TTFT (prefill), not decoding. A record without a
    last-token time (written before the field existed) uses t_end, which follows the last token by the
    final event's delay, so its rate reads slightly low. None without a second token or a time span."""
    if not r.completion_tokens or r.completion_tokens < 2 or r.t_first_token_ns is None:
        return None
    dt = ((r.t_last_token_ns or r.t_end_ns) - r.t_first_token_ns) / NS
    return (r.completion_tokens - 1) / dt if dt > 0 else None


def tpot_s(r: Record) -> float | None:
    """Time per output token after the first = (t_last_token − t_first_token) / (completion_tokens − 1)."""
    rate = request_tok_s(r)
    return 1.0 / rate if rate else None


def prefill_tok_s(r: Record) -> float | None:
    """Prompt-processing rate = (prompt_tokens − cached_tokens) / TTFT: the tokens the server computed, not
    those its prefix cache served (cached_tokens = 0 when the server does not report it). TTFT includes
    queueing and network, so this is a lower bound."""
    t = ttft_s(r)
    computed = (r.prompt_tokens or 0) - (r.cached_tokens or 0)
    return computed / t if computed > 0 and t and t > 0 else None


def itl_arrays(r: Record, estimate: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-token inter-token latency as (value s, weight) arrays.

    A content chunk that carries n > 0 tokens, after time g since the previous token-carrying chunk,
    contributes the value g/n with weight n. A chunk with no tokens (its count arrived with a later chunk)
    hands its gap on to the next one, so Σ value·weight = the time from the first to the last
    token-carrying chunk: no time between tokens is lost (when the first chunk carries the single prefill
    token, the weighted mean is the request's TPOT). Gaps after the last token-carrying chunk belong to no
    token and are dropped.

    Without per-chunk counts (`chunk_tokens` is None) every chunk counts as one token: an estimate, given
    only when `estimate` (the results keep it, the live histogram leaves it out)."""
    gaps = np.asarray(r.chunk_gaps_ns, dtype=np.int64)
    if r.chunk_tokens is None:
        if not estimate:
            return np.empty(0), np.empty(0, dtype=np.int64)
        return gaps / NS, np.ones(len(gaps), dtype=np.int64)
    counts = np.asarray(r.chunk_tokens, dtype=np.int64)[1:len(gaps) + 1]
    gaps = gaps[:len(counts)]
    if counts.size and counts.min() > 0:
        return gaps / NS / counts, counts
    carrying = np.flatnonzero(counts > 0)
    ends = np.cumsum(gaps)[carrying]  # time from the first chunk to each token-carrying chunk
    spans = np.diff(ends, prepend=0)
    return spans / NS / counts[carrying], counts[carrying]


def itl_pairs(r: Record, estimate: bool = True) -> tuple[list[float], list[int]]:
    """`itl_arrays` as lists."""
    values, weights = itl_arrays(r, estimate)
    return values.tolist(), weights.tolist()
