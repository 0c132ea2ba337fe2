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

from loadgen.metrics.record_table import NONE, RecordTable
from loadgen.record import Record

NS = 1e9
Arrivals = Callable[[Record], list[tuple[int, float]]]


def sent_mask(t: RecordTable) -> np.ndarray:
    """True where the request was sent (t_sent_ns set, not 0)."""
    sent = t.ints("t_sent_ns")
    return (sent != 0) & (sent != NONE)


def steady_window_ns(recs: Sequence[Record] | RecordTable, slots: int) -> tuple[int, int] | None:
    """(start, end) of the steady window (module docstring), or None when `slots` requests were never in
    flight at once or no request ended after that."""
    if slots <= 0:
        return None
    t = RecordTable.of(recs)
    sent = sent_mask(t)
    # the sends and the ends each in time order, walked as one sequence with the ends first at a tie (the count
    # never exceeds what it was): two sorted columns, not one of both with its order (a third of the memory)
    sends, ends = np.sort(t.ints("t_sent_ns")[sent]), np.sort(t.ints("t_end_ns")[sent])
    counted = np.arange(1, len(sends) + 1)
    ended_before_send = np.searchsorted(ends, sends, side="right")
    full_sends = np.flatnonzero(counted - ended_before_send >= slots)  # in flight just after send k
    if not full_sends.size:
        return None
    start = int(sends[full_sends[0]])
    sent_before_end = np.searchsorted(sends, ends, side="left")
    full_ends = np.flatnonzero(sent_before_end - counted >= slots)  # in flight just after end j
    # the last event with `slots` in flight is followed by an end (a send would leave as many): the end after
    # the last such end, or the first end after the last such send, whichever of the two events came later
    k = int(full_sends[-1])
    if full_ends.size and full_ends[-1] + sent_before_end[full_ends[-1]] > k + ended_before_send[k]:
        after = int(full_ends[-1]) + 1
    else:
        after = int(ended_before_send[k])
    end = int(ends[after]) if after < len(ends) else None
    return (start, end) if end is not None and end > start else None


def overlap_ns(recs: Sequence[Record] | RecordTable, start_ns: int, end_ns: int) -> np.ndarray:
    """How long each request was in flight inside [start, end] (ns; 0 for one never sent), int64."""
    t = RecordTable.of(recs)
    inside = np.minimum(t.ints("t_end_ns"), end_ns) - np.maximum(t.ints("t_sent_ns"), start_ns)
    return np.where(sent_mask(t), np.maximum(inside, 0), 0)


def token_arrivals(r: Record) -> list[tuple[int, float]]:
    """(t_ns, tokens) of each content chunk of an ok record (`chunk_arrivals` of its fields and lists)."""
    return chunk_arrivals(r.t_first_token_ns, r.completion_tokens, r.chunks, r.chunk_gaps_ns, r.chunk_tokens)


def chunk_arrivals(first_token_ns: int | None, completion_tokens: int | None, chunks: int,
                   gaps_ns: Sequence[int], chunk_tokens: Sequence[int] | None) -> list[tuple[int, float]]:
    """(t_ns, tokens) of each content chunk: chunk i arrives at t_first_token + Σ gaps[:i] and carries
    chunk_tokens[i] tokens. Without per-chunk counts, the completion tokens are spread evenly over the chunks
    (an estimate). No chunk without a first token, a completion token or a chunk."""
    if first_token_ns is None or not completion_tokens or not chunks:
        return []
    times = accumulate(gaps_ns, initial=first_token_ns)
    tokens = list(chunk_tokens) if chunk_tokens is not None else [completion_tokens / chunks] * chunks
    return list(zip(times, tokens))


def tokens_in_window(ok: Sequence[Record] | RecordTable, start_ns: int, end_ns: int,
                     arrivals: Arrivals = token_arrivals) -> float:
    """Σ tokens of the ok requests' chunks whose arrival falls in (start, end].

    A record whose chunks were moved out (`record.CHUNKS_ELSEWHERE`: kept records of a long cell) counts all
    its completion tokens when its first and last chunk lie inside, none when both lie outside on one side,
    and only a record across an edge is read chunk by chunk through `arrivals` (which can read the spill);
    so is a record that holds its own lists. Summed in record order."""
    t = RecordTable.of(ok)
    first, last = t.ints("t_first_token_ns"), t.ints("t_last_token_ns")
    timed = t.chunks_elsewhere() & (first != NONE) & (last != NONE)
    inside = timed & (first > start_ns) & (last <= end_ns)
    across = ~timed | ~(inside | (last <= start_ns) | (first > end_ns))
    per_record = np.zeros(len(t))
    per_record[inside] = np.where(t.ints("completion_tokens") == NONE, 0, t.ints("completion_tokens"))[inside]
    per_record[across] = [sum(n for at, n in arrivals(r) if start_ns < at <= end_ns) for r in t.records(across)]
    return float(np.cumsum(per_record)[-1]) if len(per_record) else 0.0  # cumsum: one add after another


def measured_edges_ns(recs: Sequence[Record] | RecordTable) -> dict:
    """{start_ns, end_ns} of the whole measured window: min(t_sent) and max(t_end) over the sent requests
    (None without one); what energy is cut to and what the wall-clock start and end are read from."""
    t = RecordTable.of(recs)
    sent = sent_mask(t)
    if not sent.any():
        return {"start_ns": None, "end_ns": None}
    return {"start_ns": int(t.ints("t_sent_ns")[sent].min()), "end_ns": int(t.ints("t_end_ns")[sent].max())}


def steady_figures(recs: Sequence[Record] | RecordTable, arrivals: Arrivals = token_arrivals) -> dict | None:
    """The steady window of a closed-loop cell, or None (open loop, or no window):

    - start_ns, end_ns: the window (module docstring); duration_s = (end − start) / 1e9
    - achieved_concurrency = Σ over requests of their time in flight inside the window / duration_s
    - output_tok_s = tokens whose chunk arrived inside the window (ok requests) / duration_s
    - requests = requests (any outcome) that ended inside the window; ok = those that ended ok
    - ramp_s = the measured window's duration minus duration_s (ramp-up plus ramp-down)
    """
    t = RecordTable.of(recs)
    cell = t.cell()
    if cell is None or cell.request_rate is not None:
        return None
    window = steady_window_ns(t, cell.concurrency)
    if window is None:
        return None
    start, end = window
    duration_s = (end - start) / NS
    ends = t.ints("t_end_ns")
    ended = (ends > start) & (ends <= end)
    whole_s = (int(ends.max()) - int(t.ints("t_sent_ns")[sent_mask(t)].min())) / NS
    return {
        "start_ns": start,
        "end_ns": end,
        "duration_s": duration_s,
        "achieved_concurrency": int(overlap_ns(t, start, end).sum()) / NS / duration_s,
        "output_tok_s": tokens_in_window(t.ok(), start, end, arrivals) / duration_s,
        "requests": int(ended.sum()),
        "ok": int((ended & t.ok_mask()).sum()),
        "ramp_s": max(0.0, whole_s - duration_s),
    }
