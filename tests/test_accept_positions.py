"""Acceptance by draft position: vLLM's per-position counters read from exposition text, their deltas over a
cell turned into rates, and the simulator's vLLM imitation counting each verify step's accepted positions."""

from __future__ import annotations

import asyncio

import pytest

from loadgen.metrics.accept_positions import acceptance_by_position, from_histograms, from_sources
from loadgen.metrics.record_table import RecordTable
from loadgen.names import Outcome
from loadgen.record import CellKey, Record
from loadgen.run.record_columns import RecordColumns
from loadgen.sim.engine import Engine
from loadgen.sim.metrics import TtftHistogram
from loadgen.sim.model import SpecConfig
from loadgen.sim.vllm_metrics import VllmCollector
from loadgen.telemetry.engine_metrics import WANTED, per_position_totals
from loadgen.telemetry.promtext import parse_samples
from loadgen.telemetry.server_metrics import ServerMetricsSource

pytestmark = pytest.mark.unit


def exposition(drafts: int, accepted: list[int], engines: int = 1) -> str:
    lines = []
    for e in range(engines):
        lines.append(f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="m"}} {drafts / engines}')
        lines.append(f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}",model_name="m"}} '
                     f'{sum(accepted) / engines}')
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="{i}"}} '
                  f'{a / engines}' for i, a in enumerate(accepted)]
    return "\n".join(lines) + "\n"


def test_per_position_counters_are_summed_over_engines():
    assert per_position_totals(parse_samples(exposition(10, [8, 4, 2], engines=2), WANTED)) == {0: 8, 1: 4, 2: 2}


def test_the_cells_rates_come_from_the_counters_deltas():
    src = ServerMetricsSource("http://127.0.0.1:1/metrics")
    src.ingest(parse_samples(exposition(100, [90, 60, 30]), WANTED), 0)
    src.ingest(parse_samples(exposition(300, [270, 160, 70]), WANTED), 10**9)  # Δ: 200 drafts; 180, 100, 40
    res = src.result()
    assert res.values["vllm"]["accepted_per_position"] == [180, 100, 40]
    rates = from_sources([res])
    assert rates == [{"position": 0, "rate": 0.9, "conditional": 0.9},
                     {"position": 1, "rate": 0.5, "conditional": pytest.approx(100 / 180)},
                     {"position": 2, "rate": 0.2, "conditional": 0.4}]
    # one plus the rates is the counters' accept length: 1 + Δaccepted / Δdrafts
    assert 1 + sum(r["rate"] for r in rates) == pytest.approx(res.values["per_source"]["counters"])
    assert acceptance_by_position([], 10) is None and acceptance_by_position([3], 0) is None
    assert acceptance_by_position([4, 0, 0], 8)[2] == {"position": 2, "rate": 0.0, "conditional": None}


def test_sglang_per_request_histograms_give_the_same_rates():
    def rec(hist, outcome=Outcome.OK):
        return Record("r", CellKey(60, 1), 0, outcome=outcome, spec={"spec_verify_ct": sum(hist),
                                                                     "spec_correct_drafts_histogram": hist})
    # steps that accepted 0, 1, 2, 3 drafts: 2, 3, 4, 1 over two requests (a failed one is left out)
    recs = [rec([1, 2, 4]), rec([1, 1, 0, 1]), rec([50, 0, 0], Outcome.HTTP_ERROR)]
    rates = from_histograms([r for r in recs if r.ok])
    assert [p["rate"] for p in rates] == pytest.approx([8 / 10, 5 / 10, 1 / 10])
    assert rates[1]["conditional"] == pytest.approx(5 / 8)
    # one plus the rates is the mean tokens a verify step committed: Σ (j + 1)·H[j] / Σ H[j]
    assert 1 + sum(p["rate"] for p in rates) == pytest.approx((2 * 1 + 3 * 2 + 4 * 3 + 1 * 4) / 10)
    assert from_histograms([Record("r", CellKey(60, 1), 0, spec={"spec_verify_ct": 3})]) is None


def test_histogram_totals_add_up_in_record_order_from_records_and_kept_columns():
    """Each position's total is the running sum over the requests in their order (a float sum depends on it):
    1e16 + 1 + 1 stays 1e16 one addition at a time; a value that is not a number counts 0."""
    hists = [[0.1, 1e16], [0.2, 1], [0.3, 1, "x"], [5]]
    recs = [Record("r", CellKey(60, 1), i, spec={"spec_correct_drafts_histogram": h}) for i, h in enumerate(hists)]
    totals = [((0.1 + 0.2) + 0.3) + 5, (1e16 + 1) + 1, 0.0]
    drafts = sum(totals)
    kept = RecordColumns()
    for r in recs:
        kept.append(r)
    try:
        for given in (recs, RecordTable.of(recs), kept.table()):
            rates = from_histograms(given)
            assert [p["rate"] for p in rates] == [(totals[1] + totals[2]) / drafts, totals[2] / drafts]
    finally:
        kept.close()


def test_the_simulator_counts_each_steps_accepted_positions():
    async def main():
        engine = Engine(SpecConfig(budget=4))
        engine.steps_by_tokens.update({1: 5, 2: 3, 4: 2})  # 5 steps kept no draft, 3 kept one, 2 kept three
        return engine, list(VllmCollector(engine, "m", TtftHistogram()).collect())

    engine, fams = asyncio.run(main())
    assert engine.accepted_at_position(4) == [5, 2, 2, 0]
    (per_pos,) = [f for f in fams if f.name == "vllm:spec_decode_num_accepted_tokens_per_pos"]
    assert [(s.labels["position"], s.value) for s in per_pos.samples] == [("0", 5), ("1", 2), ("2", 2), ("3", 0)]


def test_the_simulators_histogram_has_one_entry_per_draft_position():
    """SGLang's `spec_correct_drafts_histogram` is as long as the draft's positions, min(block_size, budget + 1),
    whatever the steps drew: a request whose steps never committed more than one token still has every entry."""
    from loadgen.sim.engine import SimRequest

    async def main(spec: SpecConfig, accept: float) -> SimRequest:
        engine = Engine(spec)
        engine.kind_means = dict.fromkeys(engine.kind_means, accept)
        req = SimRequest("r", 10, 30, 0)
        engine.submit(req)
        engine._step([req], [])  # the prefill's token: no verify step
        while not req.finished:
            engine._step([], [req])
        return req

    for spec, accept, positions in ((SpecConfig(budget=4), 1.0, 5), (SpecConfig(budget=16, block_size=8), 6.0, 8)):
        req = asyncio.run(main(spec, accept))
        assert len(req.correct_drafts) == positions and sum(req.correct_drafts) == req.verify_ct
        assert 1 + sum((j + 1) * n for j, n in enumerate(req.correct_drafts)) == req.generated == 30
    assert req.correct_drafts[0] < req.verify_ct  # accept 6 of 8: most steps kept drafts
