"""Cell figures from records. One small function per metric; the formula is in its docstring.

All inputs are measure-phase records; "ok" records only, except for the request counts and send lateness.
The per-request figures a cell aggregates (TTFT, E2E, decode rate, ITL pairs, lateness) are those of
`loadgen.metrics.request`, which the live exporter reads too, taken over the whole cell at once from columns of
the records' fields (`loadgen.metrics.request_columns`, bit-for-bit the same values). Times in records are integer ns; every figure
here is in seconds (or tokens per second).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.accept import accept_length_chunks, accept_length_per_request
from loadgen.metrics.cancel import cancellation_figures
from loadgen.metrics.category import category_figures, length_distributions
from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.connections import retried_on_new_connection
from loadgen.metrics.counts import request_counts
from loadgen.metrics.open_loop import achieved_request_rate, schedule_request_rate
from loadgen.metrics.reasoning import reasoning_figures
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.server_counts import cached_fraction, cached_tokens, draft_tokens, one_event_per_token
from loadgen.metrics.sessions import session_figures, turn_figures
from loadgen.metrics.stats import distribution, mean, percentile
from loadgen.metrics.steady import Arrivals, measured_edges_ns, steady_figures, token_arrivals
from loadgen.record import Record

NS = 1e9
Rows = Sequence[Record] | RecordTable | RequestColumns  # a cell's records, their table or their columns


def measured_window_s(recs: Rows) -> float:
    """Window = max(t_end) − min(t_sent) over the measured requests (all outcomes), in seconds."""
    cols = _columns(recs)
    if not len(cols):
        return 0.0
    return (int(cols.t_end_ns.max()) - int(cols.t_sent_ns.min())) / NS


def output_tokens(ok: Rows) -> int:
    """Σ completion_tokens of the ok requests (the server's usage counts)."""
    return _columns(ok).total("completion_tokens")


def output_tok_s(ok: Rows, window_s: float) -> float | None:
    """Aggregate output throughput = Σ completion_tokens(ok) / measured window."""
    return output_tokens(ok) / window_s if window_s > 0 else None


def prefill_time_s(ok: Rows) -> float | None:
    """Prompt-processing time as the client sees it = mean TTFT over ok requests (s): the time `prefill_tok_s`
    divides the prompt by; it includes the server's queue, which dominates at high concurrency."""
    return mean(_columns(ok).ttft_s())


def prefill_figures(ok: RequestColumns) -> dict:
    """prefill_tok_s: the mean of `request.prefill_tok_s` over the ok requests; prefill_s: `prefill_time_s`."""
    return {"prefill_tok_s": mean(ok.prefill_tok_s()), "prefill_s": prefill_time_s(ok)}


def tokens_per_chunk(ok: Rows) -> float | None:
    """Mean tokens per content chunk = Σ completion_tokens / Σ chunks (token-weighted, over ok requests).

    With speculative decoding one chunk is one verify step, so this is the client's estimate of accept
    length (it counts the prefill token's chunk too, so it reads slightly low)."""
    cols = _columns(ok)
    chunks = cols.total("chunks")
    return output_tokens(cols) / chunks if chunks else None


def _columns(recs: Rows) -> RequestColumns:
    return recs if isinstance(recs, RequestColumns) else RequestColumns.of(recs)


def achieved_concurrency(recs: Rows, window_s: float) -> float | None:
    """Little's law: Σ e2e over the measured requests (all outcomes) / measured window."""
    return sum(_columns(recs).e2e_s().tolist()) / window_s if window_s > 0 else None


def send_lateness(recs: Rows) -> dict:
    """Send lateness (s) over every measured request that was sent: p50, p99, max."""
    lateness = _columns(recs).send_lateness_s()
    return distribution(lateness, (50, 99)) | {"max": float(lateness.max()) if len(lateness) else None}


def latencies(ok: Sequence[Record] | RecordTable, chunks: ChunkFold | None = None,
              cols: RequestColumns | None = None) -> dict:
    """The latency distributions (s) over ok requests: TTFT, TPOT, ITL (the fold of `chunks`, made here when
    the cell did not fill one as its requests ended), E2E (from the actual and the intended send); the
    per-request values from `cols`, the ok records' columns (made here when not given)."""
    cols = cols if cols is not None else RequestColumns.of(ok)
    if chunks is None:
        chunks = ChunkFold.of(ok.records() if isinstance(ok, RecordTable) else ok)
    return {
        "ttft_s": distribution(cols.ttft_s()),
        "ttft_from_intended_s": distribution(cols.ttft_from_intended_s()),
        "tpot_s": distribution(cols.tpot_s()),
        "itl_s": chunks.itl_figures(),
        "e2e_s": distribution(cols.e2e_s()),
        "e2e_from_intended_s": distribution(cols.e2e_from_intended_s()),
    }


def rate_figures(recs: Sequence[Record] | RecordTable) -> dict:
    """Open-loop cells only: the schedule's realised rate and the achieved request rate (`open_loop`)."""
    cell = RecordTable.of(recs).cell()
    if cell is None or cell.request_rate is None:
        return {}
    return {"schedule_request_rate": schedule_request_rate(recs), "achieved_request_rate": achieved_request_rate(recs)}


def prompt_figures(ok: Rows) -> dict:
    """prompt_tokens_mean, _min, _max over the ok requests that reported their prompt tokens."""
    prompt = _columns(ok).present("prompt_tokens")
    return {"prompt_tokens_mean": mean(prompt), "prompt_tokens_min": min(prompt) if prompt else None,
            "prompt_tokens_max": max(prompt) if prompt else None}


def request_rate_figures(ok: Rows) -> dict:
    """`request_tok_s` over the ok requests: mean, p10, p50, p90, samples."""
    rates = _columns(ok).request_tok_s()
    return {"mean": mean(rates), "p10": percentile(rates, 10), "p50": percentile(rates, 50),
            "p90": percentile(rates, 90), "samples": len(rates)}


def server_figures(ok: RecordTable, chunks: ChunkFold) -> dict:
    """What the server said of the ok requests beyond their tokens: accept length (its per-request counts, and
    the chunk estimate), whether it streamed one event per token, prefix-cache and draft counts."""
    return {
        "accept_length_per_request": accept_length_per_request(ok),
        "accept_length_chunks": accept_length_chunks(ok),
        "one_event_per_token": one_event_per_token(ok, (chunks.counted, chunks.counted_per_token)),
        "cached_tokens": cached_tokens(ok),
        "cached_fraction": cached_fraction(ok),
        "draft_tokens": draft_tokens(ok),
    }


def summarize(recs: Sequence[Record] | RecordTable, chunks: ChunkFold | None = None,
              arrivals: Arrivals = token_arrivals) -> dict:
    """The cell's client-side figures (DESIGN.md §4), from its measure-phase records (a list of them, or the
    columns a long cell kept: `record_table.RecordTable`); the per-chunk ones from `chunks`, the fold of the ok
    records' chunks made as they ended (kept records then carry `record.CHUNKS_ELSEWHERE`, read back through
    `arrivals` where the steady window needs them), else folded here."""
    table = RecordTable.of(recs)
    ok = table.ok()
    every = RequestColumns.of(table)  # the per-request figures' fields, once (`request_columns`)
    ok_cols = RequestColumns.of(ok)
    chunks = chunks if chunks is not None else ChunkFold.of(ok.records())
    window = measured_window_s(every)
    return {
        **prompt_figures(ok_cols),
        "duration_s": window,
        "requests": request_counts(table),
        "output_tokens": output_tokens(ok_cols),
        "output_tok_s": output_tok_s(ok_cols, window),
        "request_tok_s": request_rate_figures(ok_cols),
        **latencies(ok, chunks, ok_cols),
        "steps": chunks.step_figures(),
        "retried_on_new_connection": retried_on_new_connection(table),
        **prefill_figures(ok_cols),
        "tokens_per_chunk_mean": tokens_per_chunk(ok_cols),
        **server_figures(ok, chunks),
        "send_lateness_s": send_lateness(every),
        "achieved_concurrency": achieved_concurrency(every, window),
        "lengths": length_distributions(ok),
        "by_category": category_figures(table, window),
        "cancellation": cancellation_figures(table),
        "sessions": session_figures(table),
        "by_turn": turn_figures(table),
        "reasoning": reasoning_figures(ok),
        **rate_figures(table),
        "window_ns": measured_edges_ns(table),
        "steady": steady_figures(table, arrivals),
    }
