"""Decode steps as the client sees them: the content events of one step grouped back together.

A server that streams one SSE event per token (llama.cpp's llama-server does, even when a speculative verify
step accepted several tokens) sends the events of one step back to back: they arrive 0–80 µs apart, while
steps arrive milliseconds apart (7–12 ms on a CPU build). Per-token ITL (`cell.itl_distribution`) then mostly
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

from collections.abc import Sequence

from loadgen.metrics.stats import distribution, mean
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
    events, gaps = [1], []
    since = 0
    for g in r.chunk_gaps_ns:
        since += g
        if g >= gap_ns:
            gaps.append(since)
            since = 0
            events.append(1)
        else:
            events[-1] += 1
    return events, gaps


def step_figures(ok: Sequence[Record], gap_ns: int = STEP_GAP_NS) -> dict:
    """The cell's step-level view, over ok requests (`step_groups` each):

    - `threshold_s`: the grouping threshold (`STEP_GAP_S`);
    - `step_itl_s`: mean, p50, p99 of every step gap (s), one value per gap between steps (not token-weighted);
    - `steps_per_request_mean`: mean over requests of their number of steps (the prefill's step included);
    - `events_per_step_mean`: Σ content events / Σ steps — 1 where the server sends a step as one event, about
      the accept length where it sends one event per token;
    - `tokens_per_step`: Σ completion_tokens / Σ (steps − 1) over requests with ≥ 2 steps — the client's accept
      length from steps (the formula of `accept.accept_length_chunks`, with steps in place of events)."""
    steps: list[int] = []
    gaps: list[float] = []
    events = decode_steps = decode_tokens = 0
    for r in ok:
        per_step, step_gaps = step_groups(r, gap_ns)
        if not per_step:
            continue
        steps.append(len(per_step))
        gaps += [g / NS for g in step_gaps]
        events += sum(per_step)
        if len(per_step) >= 2 and r.completion_tokens:
            decode_steps += len(per_step) - 1
            decode_tokens += r.completion_tokens
    return {
        "threshold_s": gap_ns / NS,
        "step_itl_s": distribution(gaps, (50, 99)),
        "steps_per_request_mean": mean(steps),
        "events_per_step_mean": events / sum(steps) if steps else None,
        "tokens_per_step": decode_tokens / decode_steps if decode_steps else None,
    }
