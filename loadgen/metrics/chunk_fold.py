"""A cell's per-chunk figures folded a few records at a time, so that a kept record need not keep its chunks.

Per-request figures (TTFT, E2E, decode rate, …) need one value per request and stay exact. The figures over
every chunk — per-token ITL, the step view, whether the server streams one event per token — would need the
cell to hold every chunk until its end (~20 bytes a chunk: ~180 MB in an hour at 2,500 chunks/s). `ChunkFold`
takes ok records as they end, in batches (one pass of array arithmetic per batch: the per-chunk cost stays
~0.1 µs), with the per-record formulas of `request.itl_arrays` and `steps.step_marks` (`steps.StepSums`; a test holds
the batch and the per-record formulas equal), into bounded sums: exact while the cell has at most `sketch.EXACT_MAX` values of a distribution,
percentiles within 0.1 % beyond (`sketch.BoundedDistribution`); means, counts and sums always exact.
`summarize` without a fold folds its records itself, so a cell's figures come from one formula either way.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from loadgen.metrics.request import itl_arrays, token_gap_s
from loadgen.metrics.sketch import BoundedDistribution
from loadgen.metrics.steps import STEP_GAP_NS, StepSums, joined_gaps
from loadgen.record import Record, chunks_elsewhere


class ChunkFold:
    """The per-chunk sums of one cell's ok records (module docstring)."""

    def __init__(self, gap_ns: int = STEP_GAP_NS):
        self.gap_ns = gap_ns
        self.itl = BoundedDistribution(weighted=True)
        self.steps = StepSums(gap_ns)
        self.counted = 0  # ok records with ≥ 2 chunks and per-chunk counts
        self.counted_per_token = True  # … every one of whose per-chunk counts is ≤ 1

    @classmethod
    def of(cls, ok: Sequence[Record], gap_ns: int = STEP_GAP_NS) -> "ChunkFold":
        fold = cls(gap_ns)
        fold.add(ok)
        return fold

    def add(self, recs: Sequence[Record]) -> None:
        """Fold ok records (their per-chunk lists still in them)."""
        for r in recs:
            if chunks_elsewhere(r):
                raise ValueError(f"record {r.request_id}: its chunks were folded already")
        with_chunks = [r for r in recs if r.chunks > 0]
        if not with_chunks:
            return
        joined = joined_gaps(with_chunks)
        self._add_itl(with_chunks, joined[0])
        self.steps.add(with_chunks, joined)
        for r in with_chunks:
            if r.chunks >= 2 and r.completion_tokens and r.chunk_tokens:
                self.counted += 1
                self.counted_per_token = self.counted_per_token and max(r.chunk_tokens) <= 1

    def _add_itl(self, recs: list[Record], gaps: np.ndarray) -> None:
        """`itl_arrays` of every record: at once where each chunk after the first carries tokens."""
        counted = [r.chunk_tokens for r in recs if r.chunk_tokens is not None]
        if len(counted) == len(recs):
            counts = array("q")
            for r, tokens in zip(recs, counted):
                counts.extend(tokens[1:len(r.chunk_gaps_ns) + 1])
            if len(counts) == len(gaps):
                n = np.frombuffer(counts, dtype=np.int64)
                if n.size == 0 or n.min() > 0:
                    self.itl.add(token_gap_s(gaps, n), n)
                    return
        for r in recs:
            self.itl.add(*itl_arrays(r))

    def itl_figures(self) -> dict:
        """Per-token ITL over the cell: `stats.weighted_distribution` of every ok request's `itl_arrays`."""
        return self.itl.summary()

    def step_figures(self) -> dict:
        """`steps.step_figures` of the folded records."""
        return self.steps.figures()
