"""The steady window of a closed-loop cell: the part of the measured window in which all C slots were busy.

A closed-loop cell ramps up (slots send their first requests) and ramps down (slots find no more work and
fall idle one by one while the last requests finish). Figures over the whole window mix those ramps in: the
achieved concurrency reads below C and the last requests run alone, faster. The steady window is

    start = the first moment C requests were in flight at once (the C-th concurrent send)
    end   = the moment the first slot found no more work: the first request end after the last moment C
            requests were in flight (the last send that filled every slot)

from the records' own `t_sent_ns` and `t_end_ns` (every outcome: a failed request held its slot too). All
processes stamp CLOCK_MONOTONIC, so records of `--workers` processes merge on one time line. A cell whose
in-flight count never reached C (an open-loop cell, a shard's part of a cell) has no steady window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate

import numpy as np

from loadgen.record import Record, chunks_elsewhere

NS = 1e9
Arrivals = Callable[[Record], list[tuple[int, float]]]


def in_flight_events(recs: Sequence[Record]) -> list[tuple[int, int]]:
    """(t_ns, +1 at a send | −1 at an end) of every sent request, in time order (ends first at a tie)."""
    events = [(r.t_sent_ns, 1) for r in recs if r.t_sent_ns] + [(r.t_end_ns, -1) for r in recs if r.t_sent_ns]
    return sorted(events)


def steady_window_ns(recs: Sequence[Record], slots: int) -> tuple[int, int] | None:
    """(start, end) of the steady window (module docstring), or None when `slots` requests were never in
    flight at once or no request ended after that."""
    if slots <= 0:
        return None
    sent = [r for r in recs if r.t_sent_ns]
    times = np.fromiter((t for r in sent for t in (r.t_sent_ns, r.t_end_ns)), dtype=np.int64, count=2 * len(sent))
    deltas = np.tile(np.array([1, -1], dtype=np.int64), len(sent))
    order = np.lexsort((deltas, times))  # `in_flight_events`' order: by time, ends first at a tie
    times, deltas = times[order], deltas[order]
    full = np.flatnonzero(np.cumsum(deltas) >= slots)
    if not full.size:
        return None
    start = int(times[full[0]])
    ends_after = np.flatnonzero(deltas[full[-1] + 1:] < 0)
    end = int(times[full[-1] + 1 + ends_after[0]]) if ends_after.size else None
    return (start, end) if end is not None and end > start else None


def overlap_ns(r: Record, start_ns: int, end_ns: int) -> int:
    """How long request `r` was in flight inside [start, end] (ns)."""
    return max(0, min(r.t_end_ns, end_ns) - max(r.t_sent_ns, start_ns)) if r.t_sent_ns else 0


def token_arrivals(r: Record) -> list[tuple[int, float]]:
    """(t_ns, tokens) of each content chunk of an ok record: chunk i arrives at t_first_token + Σ gaps[:i]
    and carries chunk_tokens[i] tokens. Without per-chunk counts, the completion tokens are spread evenly
    over the chunks (an estimate)."""
    if r.t_first_token_ns is None or not r.completion_tokens or not r.chunks:
        return []
    times = accumulate(r.chunk_gaps_ns, initial=r.t_first_token_ns)
    tokens = list(r.chunk_tokens) if r.chunk_tokens is not None else [r.completion_tokens / r.chunks] * r.chunks
    return list(zip(times, tokens))


def tokens_in_window(ok: Sequence[Record], start_ns: int, end_ns: int, arrivals: Arrivals = token_arrivals) -> float:
    """Σ tokens of the ok requests' chunks whose arrival falls in (start, end].

    A record whose chunks were moved out (`record.CHUNKS_ELSEWHERE`: kept records of a long cell) counts all
    its completion tokens when its first and last chunk lie inside, none when both lie outside on one side,
    and only a record across an edge is read chunk by chunk through `arrivals` (which can read the spill)."""
    total = 0.0
    for r in ok:
        if chunks_elsewhere(r) and r.t_first_token_ns is not None and r.t_last_token_ns is not None:
            first, last = r.t_first_token_ns, r.t_last_token_ns
            if first > start_ns and last <= end_ns:
                total += r.completion_tokens or 0
                continue
            if last <= start_ns or first > end_ns:
                continue
        total += sum(n for t, n in arrivals(r) if start_ns < t <= end_ns)
    return total


def measured_edges_ns(recs: Sequence[Record]) -> dict:
    """{start_ns, end_ns} of the whole measured window: min(t_sent) and max(t_end) over the sent requests
    (None without one); what energy is cut to and what the wall-clock start and end are read from."""
    sent = [r for r in recs if r.t_sent_ns]
    if not sent:
        return {"start_ns": None, "end_ns": None}
    return {"start_ns": min(r.t_sent_ns for r in sent), "end_ns": max(r.t_end_ns for r in sent)}


def steady_figures(recs: Sequence[Record], arrivals: Arrivals = token_arrivals) -> dict | None:
    """The steady window of a closed-loop cell, or None (open loop, or no window):

    - start_ns, end_ns: the window (module docstring); duration_s = (end − start) / 1e9
    - achieved_concurrency = Σ over requests of their time in flight inside the window / duration_s
    - output_tok_s = tokens whose chunk arrived inside the window (ok requests) / duration_s
    - requests = requests (any outcome) that ended inside the window; ok = those that ended ok
    - ramp_s = the measured window's duration minus duration_s (ramp-up plus ramp-down)
    """
    if not recs or recs[0].cell.request_rate is not None:
        return None
    window = steady_window_ns(recs, recs[0].cell.concurrency)
    if window is None:
        return None
    start, end = window
    duration_s = (end - start) / NS
    ended = [r for r in recs if start < r.t_end_ns <= end]
    ok = [r for r in recs if r.ok]
    whole_s = (max(r.t_end_ns for r in recs) - min(r.t_sent_ns for r in recs if r.t_sent_ns)) / NS
    return {
        "start_ns": start,
        "end_ns": end,
        "duration_s": duration_s,
        "achieved_concurrency": sum(overlap_ns(r, start, end) for r in recs) / NS / duration_s,
        "output_tok_s": tokens_in_window(ok, start, end, arrivals) / duration_s,
        "requests": len(ended),
        "ok": sum(r.ok for r in ended),
        "ramp_s": max(0.0, whole_s - duration_s),
    }
