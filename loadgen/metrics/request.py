"""Per-request figures: each formula written once, over a record's fields or over columns of them.

A figure's formula (`latency_s`, `decode_rate`, ...) is plain arithmetic that reads the same on one record's
integers and on numpy columns of a cell's records; the one-record functions below (`ttft_s(r)`, ...) and the
columns (`loadgen.metrics.request_columns`) both call it, each only choosing the rows that have the figure. The
cell summary reads the columns, the live exporter (`exporters/live.py`) and the SLO judge the one-record
functions, so a figure means the same in the results file and on the dashboard. Record times are integer ns on
the monotonic clock; every figure here is in seconds (or tokens per second).
"""

from __future__ import annotations

import numpy as np

from loadgen.record import Record

NS = 1e9


def latency_s(later_ns, earlier_ns):
    """(later − earlier) / 1e9: TTFT, end-to-end latency, each from the sent or the intended time."""
    return (later_ns - earlier_ns) / NS


def lateness_s(sent_ns, intended_ns):
    """max(0, sent − intended) / 1e9, written as a product so that it reads alike on an int and a column."""
    late = sent_ns - intended_ns
    return late * (late > 0) / NS


def decode_rate(completion_tokens, decode_s):
    """(completion_tokens − 1) / decode_s: the tokens after the first over the time from first to last token."""
    return (completion_tokens - 1) / decode_s


def per_token_s(rate):
    """1 / rate: the time per output token after the first, of a decode rate."""
    return 1.0 / rate


def token_gap_s(gaps_ns, tokens):
    """gap / 1e9 / tokens: the inter-token latency of each token a chunk carried after its gap."""
    return gaps_ns / NS / tokens


def prefill_rate(computed_tokens, ttft):
    """computed_tokens / TTFT: the prompt tokens the server computed (not served from its cache) per second."""
    return computed_tokens / ttft


def ttft_s(r: Record) -> float | None:
    """Time to first token = t_first_token − t_sent (first chunk carrying content, not the first byte)."""
    return latency_s(r.t_first_token_ns, r.t_sent_ns) if r.t_first_token_ns is not None else None


def ttft_from_intended_s(r: Record) -> float | None:
    """TTFT from the intended send time = t_first_token − t_intended (includes client queueing)."""
    return latency_s(r.t_first_token_ns, r.t_intended_ns) if r.t_first_token_ns is not None else None


def e2e_s(r: Record) -> float:
    """End-to-end latency = t_end − t_sent."""
    return latency_s(r.t_end_ns, r.t_sent_ns)


def e2e_from_intended_s(r: Record) -> float:
    """End-to-end latency from the intended send time = t_end − t_intended."""
    return latency_s(r.t_end_ns, r.t_intended_ns)


def send_lateness_s(r: Record) -> float | None:
    """Client queueing = max(0, t_sent − t_intended); None for a request never sent (t_sent = 0).

    No scheduler sends before the due time, so the max only guards the live histogram, whose `_sum` must
    never go down (Prometheus would read a counter reset)."""
    if not r.t_sent_ns or not r.t_intended_ns:
        return None
    return lateness_s(r.t_sent_ns, r.t_intended_ns)


def request_tok_s(r: Record) -> float | None:
    """Per-request decode rate = (completion_tokens − 1) / (t_last_token − t_first_token), tokens/s.

    The first token is excluded because its time is TTFT (prefill), not decoding. A record without a
    last-token time (written before the field existed) uses t_end, which follows the last token by the
    final event's delay, so its rate reads slightly low. None without a second token or a time span."""
    if not r.completion_tokens or r.completion_tokens < 2 or r.t_first_token_ns is None:
        return None
    dt = latency_s(r.t_last_token_ns or r.t_end_ns, r.t_first_token_ns)
    return decode_rate(r.completion_tokens, dt) if dt > 0 else None


def tpot_s(r: Record) -> float | None:
    """Time per output token after the first = (t_last_token − t_first_token) / (completion_tokens − 1)."""
    rate = request_tok_s(r)
    return per_token_s(rate) if rate else None


def prefill_tok_s(r: Record) -> float | None:
    """Prompt-processing rate = (prompt_tokens − cached_tokens) / TTFT: the tokens the server computed, not
    those its prefix cache served (cached_tokens = 0 when the server does not report it). TTFT includes
    queueing and network, so this is a lower bound."""
    t = ttft_s(r)
    computed = (r.prompt_tokens or 0) - (r.cached_tokens or 0)
    return prefill_rate(computed, t) if computed > 0 and t and t > 0 else None


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
        return token_gap_s(gaps, counts), counts
    carrying = np.flatnonzero(counts > 0)
    ends = np.cumsum(gaps)[carrying]  # time from the first chunk to each token-carrying chunk
    spans = np.diff(ends, prepend=0)
    return token_gap_s(spans, counts[carrying]), counts[carrying]


def itl_pairs(r: Record, estimate: bool = True) -> tuple[list[float], list[int]]:
    """`itl_arrays` as lists."""
    values, weights = itl_arrays(r, estimate)
    return values.tolist(), weights.tolist()
