"""The SLO figures a cell's result reads (over its columns, `slo.meets_rows`) and the live tally's per-record
rules (`slo.meets`, `is_good`) are one judgement: on many varied records, from a list and from the columns a long
cell keeps, every request's verdict and the cell's figures are the same both ways."""

from __future__ import annotations

import copy
import random

import pytest

from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.slo import (
    NO_CHANCE_TO_BE_LATE,
    SloTally,
    good_rows,
    is_good,
    judged,
    meets,
    meets_rows,
    slo_figures,
)
from loadgen.names import Outcome, SloMetric
from loadgen.record import CellKey, Record
from loadgen.run.chunk_spill import CellRecords

pytestmark = pytest.mark.unit

MS = 1_000_000
CELL = CellKey(60, 8)
OUTCOMES = (Outcome.OK,) * 6 + (Outcome.HTTP_ERROR, Outcome.CANCELLED, Outcome.ABANDONED, Outcome.TIMEOUT)


def varied(n: int, seed: int) -> list[Record]:
    """Records that reach every branch of a target's rule: failed, abandoned, never sent, no first token, 0, 1
    or 2 tokens, no last-token time (or 0), a decode span of 0, chunks of 0 tokens, no per-chunk counts."""
    rng = random.Random(seed)
    recs = []
    for seq in range(n):
        sent = 0 if rng.random() < 0.03 else 10_000 * MS + rng.randint(0, 5000) * MS
        tokens = rng.choice([None, 0, 1, 2, 3, 8, 40])
        chunks = 0 if not tokens else rng.randint(1, tokens)
        first = None if rng.random() < 0.08 else sent + rng.randint(1, 400) * MS
        gaps = [rng.randint(0, 60) * MS for _ in range(max(chunks - 1, 0))]
        last = None if first is None else rng.choice([first + sum(gaps), first, None, 0])
        end = (last or first or sent) + rng.randint(0, 3) * MS
        counts = None if rng.random() < 0.2 else [rng.choice([0, 1, 1, 2]) for _ in range(chunks)]
        recs.append(Record("r", CELL, seq, t_intended_ns=max(sent - rng.randint(0, 30) * MS, 0), t_sent_ns=sent,
                           t_first_token_ns=first, t_last_token_ns=last, t_end_ns=end,
                           outcome=rng.choice(OUTCOMES), completion_tokens=tokens, chunks=chunks,
                           chunk_tokens=counts, chunk_gaps_ns=gaps))
    rng.shuffle(recs)
    return recs


TARGETS = [{SloMetric.TTFT: 0.2}, {SloMetric.TPOT: 0.02}, {SloMetric.ITL: 0.03}, {SloMetric.E2E: 0.3},
           {SloMetric.TTFT_FROM_INTENDED: 0.25},
           {SloMetric.TTFT: 0.3, SloMetric.TPOT: 0.03, SloMetric.ITL: 0.04, SloMetric.E2E: 0.5}]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_requests_verdict_is_the_per_record_rules(seed):
    recs = varied(600, seed)
    table = RecordTable.of(recs)
    for metric in SloMetric:
        for target in (0.0, 0.005, 0.02, 0.1, 0.3, 10.0):
            assert meets_rows(table, metric, target).tolist() == [meets(r, metric, target) for r in recs], \
                (metric, target)
    for targets in TARGETS:
        assert good_rows(table, targets).tolist() == [is_good(r, targets) for r in recs]
    # the records reach both sides of each rule: a verdict that were always the same would prove nothing
    for metric in SloMetric:
        verdicts = {meets(r, metric, 0.02) for r in recs}
        assert verdicts == {True, False}, metric
    short = [r for r in recs if r.ok and (r.completion_tokens or 0) < 2]  # TPOT, ITL: no chance to be late
    assert short and all(meets(r, m, 0.0) for r in short for m in NO_CHANCE_TO_BE_LATE)


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("targets", TARGETS)
def test_the_cells_figures_are_those_of_the_live_tally(seed, targets):
    recs = varied(400, seed)
    tally = SloTally(targets)
    for r in recs:
        tally.add(r)
    kept = CellRecords(keep_chunks=True)  # a cell with latency targets keeps its chunks (ITL reads them)
    for r in copy.deepcopy(recs):
        kept.keep(r)
    kept.finish()
    try:
        for source in (recs, kept.table()):
            f = slo_figures(source, targets, 0.5, window_s=4.0, not_sent=3, slots=CELL.concurrency)
            assert (f["good"], f["scheduled"] - 3) == (tally.good, tally.ended)
            assert f["per_target"] == {m: sum(meets(r, m, t) for r in recs if judged(r)) / f["scheduled"]
                                       for m, t in targets.items()}
            good = [r for r in recs if judged(r) and is_good(r, targets)]
            assert f["good_output_tok_s"] == sum(r.completion_tokens or 0 for r in good) / 4.0
            wave = sorted((r for r in recs if judged(r) and r.t_sent_ns), key=lambda r: r.t_sent_ns)[:CELL.concurrency]
            assert (f["first_wave"], f["first_wave_misses"]) == \
                (CELL.concurrency, sum(not is_good(r, targets) for r in wave))
    finally:
        kept.close()
