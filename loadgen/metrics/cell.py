"""Cell figures from records. One small function per metric; the formula is in its docstring.

All inputs are measure-phase records; "ok" records only, except for the request counts and send lateness.
The per-request figures a cell aggregates (TTFT, E2E, decode rate, ITL pairs, lateness) come from
`loadgen.metrics.request`, which the live exporter reads too. Times in records are integer ns; every figure
here is in seconds (or tokens per second).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.accept import accept_length_chunks, accept_length_per_request
from loadgen.metrics.cancel import cancellation_figures
from loadgen.metrics.category import category_figures, length_distributions
from loadgen.metrics.connections import retried_on_new_connection
from loadgen.metrics.counts import request_counts
from loadgen.metrics.open_loop import achieved_request_rate, schedule_request_rate
from loadgen.metrics.reasoning import reasoning_figures
from loadgen.metrics.request import (
    e2e_from_intended_s,
    e2e_s,
    itl_pairs,
    prefill_tok_s,
    request_tok_s,
    send_lateness_s,
    tpot_s,
    ttft_from_intended_s,
    ttft_s,
)
from loadgen.metrics.server_counts import cached_fraction, cached_tokens, draft_tokens, one_event_per_token
from loadgen.metrics.sessions import session_figures, turn_figures
from loadgen.metrics.stats import distribution, mean, percentile, weighted_distribution
from loadgen.metrics.steady import measured_edges_ns, steady_figures
from loadgen.metrics.steps import step_figures
from loadgen.record import Record

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


def prefill_time_s(ok: Sequence[Record]) -> float | None:
    """Prompt-processing time as the client sees it = mean TTFT over ok requests (s): the time `prefill_tok_s`
    divides the prompt by; it includes the server's queue, which dominates at high concurrency."""
    return mean(_present(ttft_s(r) for r in ok))


def tokens_per_chunk(ok: Sequence[Record]) -> float | None:
    """Mean tokens per content chunk = Σ completion_tokens / Σ chunks (token-weighted, over ok requests).

    With speculative decoding one chunk is one verify step, so this is the client's estimate of accept
    length (it counts the prefill token's chunk too, so it reads slightly low)."""
    chunks = sum(r.chunks for r in ok)
    return output_tokens(ok) / chunks if chunks else None


def _present(values) -> list:
    return [x for x in values if x is not None]


def itl_distribution(ok: Sequence[Record]) -> dict:
    """Per-token ITL over the cell: the (value, weight) pairs of every ok request (`itl_pairs`), exact
    weighted percentiles (`weighted_distribution`)."""
    values: list[float] = []
    weights: list[int] = []
    for r in ok:
        v, w = itl_pairs(r)
        values += v
        weights += w
    return weighted_distribution(values, weights)


def achieved_concurrency(recs: Sequence[Record], window_s: float) -> float | None:
    """Little's law: Σ e2e over the measured requests (all outcomes) / measured window."""
    return sum(e2e_s(r) for r in recs) / window_s if window_s > 0 else None


def send_lateness(recs: Sequence[Record]) -> dict:
    """Send lateness (s) over every measured request that was sent: p50, p99, max."""
    lateness = _present(send_lateness_s(r) for r in recs)
    return distribution(lateness, (50, 99)) | {"max": max(lateness) if lateness else None}


def latencies(ok: Sequence[Record]) -> dict:
    """The latency distributions (s) over ok requests: TTFT, TPOT, ITL, E2E (from the actual and the
    intended send)."""
    return {
        "ttft_s": distribution(_present(ttft_s(r) for r in ok)),
        "ttft_from_intended_s": distribution(_present(ttft_from_intended_s(r) for r in ok)),
        "tpot_s": distribution(_present(tpot_s(r) for r in ok)),
        "itl_s": itl_distribution(ok),
        "e2e_s": distribution([e2e_s(r) for r in ok]),
        "e2e_from_intended_s": distribution([e2e_from_intended_s(r) for r in ok]),
    }


def rate_figures(recs: Sequence[Record]) -> dict:
    """Open-loop cells only: the schedule's realised rate and the achieved request rate (`open_loop`)."""
    if not recs or recs[0].cell.request_rate is None:
        return {}
    return {"schedule_request_rate": schedule_request_rate(recs), "achieved_request_rate": achieved_request_rate(recs)}


def summarize(recs: Sequence[Record]) -> dict:
    """The cell's client-side figures (DESIGN.md §4), from its measure-phase records."""
    ok = [r for r in recs if r.ok]
    window = measured_window_s(recs)
    rates = _present(request_tok_s(r) for r in ok)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    return {
        "prompt_tokens_mean": mean(prompt),
        "prompt_tokens_min": min(prompt) if prompt else None,
        "prompt_tokens_max": max(prompt) if prompt else None,
        "duration_s": window,
        "requests": request_counts(recs, ok),
        "output_tokens": output_tokens(ok),
        "output_tok_s": output_tok_s(ok, window),
        "request_tok_s": {"mean": mean(rates), "p10": percentile(rates, 10), "p50": percentile(rates, 50),
                          "p90": percentile(rates, 90), "samples": len(rates)},
        **latencies(ok),
        "steps": step_figures(ok),
        "retried_on_new_connection": retried_on_new_connection(recs),
        "prefill_tok_s": mean(_present(prefill_tok_s(r) for r in ok)),
        "prefill_s": prefill_time_s(ok),
        "tokens_per_chunk_mean": tokens_per_chunk(ok),
        "accept_length_per_request": accept_length_per_request(ok),
        "accept_length_chunks": accept_length_chunks(ok),
        "one_event_per_token": one_event_per_token(ok),
        "cached_tokens": cached_tokens(ok),
        "cached_fraction": cached_fraction(ok),
        "draft_tokens": draft_tokens(ok),
        "send_lateness_s": send_lateness(recs),
        "achieved_concurrency": achieved_concurrency(recs, window),
        "lengths": length_distributions(ok),
        "by_category": category_figures(recs, window),
        "cancellation": cancellation_figures(recs),
        "sessions": session_figures(recs),
        "by_turn": turn_figures(recs),
        "reasoning": reasoning_figures(ok),
        **rate_figures(recs),
        "window_ns": measured_edges_ns(recs),
        "steady": steady_figures(recs),
    }
