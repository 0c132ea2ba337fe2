"""Decode steps as the client sees them: the content events of one step grouped back together.

A server that streams one SSE event per token (llama.cpp's llama-server does, even when a speculative verify
step accepted several tokens) sends the events of one step back to back: they arrive 0–80 µs apart, while
steps arrive milliseconds apart (7–12 ms on a CPU build). Per-token ITL (`ChunkFold.itl_figures`) then mostly
reads the gap inside a step (~20 µs), which is no generation speed. Here consecutive content events closer
than `STEP_GAP_S` are one step.

Why 1 ms: it is more than 12× the widest gap seen between the events of one step (80 µs, where the server
writes each event with its own send and the client may read them one by one), and below the shortest step
of a server that runs a forward pass per step (a verify step of a real model takes milliseconds; the fastest
ones measured are 2–3 ms). Events that arrive in one read share one time stamp (gap 0) and always group.
A server whose steps are faster than 1 ms, or a client so late that two steps' events arrive within 1 ms of
each other, would have its steps merged: the figures then read fewer, longer steps.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from loadgen.metrics.sketch import BoundedDistribution
from loadgen.record import Record

STEP_GAP_S = 1e-3
STEP_GAP_NS = int(STEP_GAP_S * 1e9)
NS = 1e9


def step_groups(r: Record, gap_ns: int = STEP_GAP_NS) -> tuple[list[int], list[int]]:
    """(content events per step, step gaps in ns) of one record.

    A new step begins at a content event whose gap from the previous content event (`chunk_gaps_ns`) is
    ≥ `gap_ns`; the first step is the first content event and those right behind it (the prefill's token).
    Step gap j = time from the first event of step j to the first event of step j+1 (the sum of the event
    gaps between them), so Σ step gaps = time from the first event to the first event of the last step."""
    if r.chunks <= 0:
        return [], []
    n_events, starts, step_gaps = step_marks(r, gap_ns)
    return np.diff(np.append(starts, n_events)).tolist(), step_gaps.tolist()


def step_marks(r: Record, gap_ns: int = STEP_GAP_NS) -> tuple[int, np.ndarray, np.ndarray]:
    """(content events, index of each step's first event, step gaps in ns) of a record with chunks: the
    arrays behind `step_groups` (one content event per gap, plus the first)."""
    gaps = np.asarray(r.chunk_gaps_ns, dtype=np.int64)
    marks = np.flatnonzero(gaps >= gap_ns)
    step_gaps = np.diff(np.cumsum(gaps)[marks], prepend=0)
    return len(gaps) + 1, np.append(0, marks + 1), step_gaps


def joined_gaps(recs: Sequence[Record]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(every record's gaps end to end, the record each gap belongs to, where each record's gaps start)."""
    joined = array("q")
    lengths = np.empty(len(recs), dtype=np.int64)
    for i, r in enumerate(recs):
        joined.extend(r.chunk_gaps_ns)
        lengths[i] = len(r.chunk_gaps_ns)
    gaps = np.frombuffer(joined, dtype=np.int64) if joined else np.empty(0, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return gaps, np.repeat(np.arange(len(recs)), lengths), starts


class StepSums:
    """The sums behind `step_figures`, added a batch of records at a time (bounded: the step gaps go to a
    `BoundedDistribution`)."""

    def __init__(self, gap_ns: int = STEP_GAP_NS):
        self.gap_ns = gap_ns
        self.gaps = BoundedDistribution(weighted=False)
        self.requests = self.steps = self.events = self.decode_steps = self.decode_tokens = 0

    def add(self, recs: Sequence[Record], joined: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """`step_marks` of every record (each with chunks) at once, from their `joined_gaps`: a step begins
        after a gap ≥ `gap_ns`; its gap runs from the previous step's first event (or the record's first)."""
        gaps, owner, starts = joined
        marks = np.flatnonzero(gaps >= self.gap_ns)
        ends = np.cumsum(gaps)
        at = ends[marks]  # from the first gap of the batch to each step's first event
        mark_owner = owner[marks]
        base = np.empty_like(at)  # … to the first event of the step before, or the record's first event
        base[1:] = at[:-1]
        first = np.ones(len(marks), dtype=bool)
        first[1:] = mark_owner[1:] != mark_owner[:-1]
        record_base = np.where(starts > 0, ends[starts - 1], 0) if len(gaps) else np.zeros_like(starts)
        base[first] = record_base[mark_owner[first]]
        self.gaps.add((at - base) / NS)
        per_rec = np.bincount(mark_owner, minlength=len(recs))
        self.requests += len(recs)
        self.steps += len(recs) + len(marks)
        self.events += len(gaps) + len(recs)
        tokens = np.array([r.completion_tokens or 0 for r in recs], dtype=np.int64)
        decoding = (per_rec >= 1) & (tokens > 0)
        self.decode_steps += int(per_rec[decoding].sum())
        self.decode_tokens += int(tokens[decoding].sum())

    def figures(self) -> dict:
        return {
            "threshold_s": self.gap_ns / NS,
            "step_itl_s": self.gaps.summary((50, 99)),
            "steps_per_request_mean": self.steps / self.requests if self.requests else None,
            "events_per_step_mean": self.events / self.steps if self.steps else None,
            "tokens_per_step": self.decode_tokens / self.decode_steps if self.decode_steps else None,
        }


def step_figures(ok: Sequence[Record], gap_ns: int = STEP_GAP_NS) -> dict:
    """The cell's step-level view, over ok requests (`step_groups` each; summed by `StepFold`):

    - `threshold_s`: the grouping threshold (`STEP_GAP_S`);
    - `step_itl_s`: mean, p50, p99 of every step gap (s), one value per gap between steps (not token-weighted;
      exact up to `sketch.EXACT_MAX` gaps, beyond that percentiles within 0.1 %: `sketch.BoundedDistribution`);
    - `steps_per_request_mean`: mean over requests of their number of steps (the prefill's step included);
    - `events_per_step_mean`: Σ content events / Σ steps — 1 where the server sends a step as one event, about
      the accept length where it sends one event per token;
    - `tokens_per_step`: Σ completion_tokens / Σ (steps − 1) over requests with ≥ 2 steps — the client's accept
      length from steps (the formula of `accept.accept_length_chunks`, with steps in place of events)."""
    sums = StepSums(gap_ns)
    with_chunks = [r for r in ok if r.chunks > 0]
    if with_chunks:
        sums.add(with_chunks, joined_gaps(with_chunks))
    return sums.figures()
