"""Latency targets on hand-built records with known answers: a request's goodness (TPOT as vLLM defines it, the
request's own ITL p99, failures and never-sent requests not good), the cell's attainment and goodput, the
`slo` part's round trip, the flags' errors, never-best, the early stop's signature, the
live exporter's values and the Pareto frontier."""

from __future__ import annotations

import tomllib

import pytest

from exporters.live import LiveExporter
from loadgen.config import SloConfig
from loadgen.metrics.oversaturation import Reference, oversaturated
from loadgen.metrics.slo import SloTally, is_good, itl_p99_s, meets, slo_figures
from loadgen.names import Outcome, Phase
from loadgen.record import CellKey, Record
from loadgen.report import compare
from loadgen.report.pareto import Point, frontier
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.cell_status import not_best
from loadgen.results.objectives import Objective
from loadgen.results.verdict import Decision, verdicts
from loadgen.sweep.spec import parse_spec
from tests.cells import typed

pytestmark = pytest.mark.unit

MS = 1_000_000
CELL = CellKey(60, 4)


def rec(seq: int, ttft_ms: float = 10, tokens: int = 11, decode_ms: float = 100, outcome=Outcome.OK,
        gaps_ms: list[float] | None = None, sent_ms: float = 0) -> Record:
    """Sent at `sent_ms`, first token after `ttft_ms`, last after `decode_ms` more, ended 1 ms later."""
    t0 = 10_000 * MS + int(sent_ms * MS)
    first = t0 + int(ttft_ms * MS)
    last = first + int(decode_ms * MS)
    gaps = [int(g * MS) for g in gaps_ms] if gaps_ms else [int(decode_ms * MS / (tokens - 1))] * (tokens - 1)
    return Record("r", CELL, seq, t_intended_ns=t0, t_sent_ns=t0, t_first_token_ns=first, t_last_token_ns=last,
                  t_end_ns=last + MS, outcome=outcome, completion_tokens=tokens, chunks=tokens,
                  chunk_tokens=[1] * tokens, chunk_gaps_ns=gaps)


def test_a_request_is_good_when_it_succeeded_and_met_every_target():
    r = rec(0, ttft_ms=50, tokens=11, decode_ms=200)  # TPOT = 200 ms / 10 = 20 ms
    assert meets(r, "ttft", 0.05) and not meets(r, "ttft", 0.049)
    assert meets(r, "tpot", 0.020) and not meets(r, "tpot", 0.0199)
    assert meets(r, "e2e", 0.251) and not meets(r, "e2e", 0.25)
    assert is_good(r, {"ttft": 0.05, "tpot": 0.02}) and not is_good(r, {"ttft": 0.05, "tpot": 0.019})
    failed = rec(1, outcome=Outcome.HTTP_ERROR)
    cancelled = rec(2, outcome=Outcome.CANCELLED)
    assert not is_good(failed, {"e2e": 100}) and not is_good(cancelled, {"e2e": 100})
    assert is_good(rec(3), {})  # no target: any request that succeeded


def test_tpot_and_itl_of_a_request_without_a_second_token_are_met_but_a_missing_first_token_is_not():
    one = rec(0, tokens=1, decode_ms=0, gaps_ms=[0])
    one.chunk_gaps_ns = []
    assert meets(one, "tpot", 1e-6) and meets(one, "itl", 1e-6)
    silent = rec(1)
    silent.t_first_token_ns = None
    assert not meets(silent, "ttft", 100) and not meets(silent, "ttft_from_intended", 100)


def test_itl_target_is_the_requests_own_p99_gap():
    r = rec(0, tokens=101, decode_ms=100 * 5 + 95, gaps_ms=[5] * 99 + [100])  # 99 gaps of 5 ms, one of 100 ms
    assert itl_p99_s(r) == pytest.approx(0.005)
    spiky = rec(1, tokens=11, gaps_ms=[5] * 8 + [100, 100])  # 2 of 10 gaps are 100 ms: p99 is 100 ms
    assert itl_p99_s(spiky) == pytest.approx(0.1)
    assert meets(r, "itl", 0.006) and not meets(spiky, "itl", 0.05)


def test_cell_figures_count_failed_and_never_sent_requests_as_not_good():
    recs = [rec(0, ttft_ms=10), rec(1, ttft_ms=20), rec(2, ttft_ms=400), rec(3, outcome=Outcome.TIMEOUT)]
    f = slo_figures(recs, {"ttft": 0.1}, 0.5, window_s=2.0, not_sent=1)
    assert (f["scheduled"], f["good"]) == (5, 2)
    assert f["attainment"] == pytest.approx(2 / 5) and f["per_target"] == {"ttft": pytest.approx(2 / 5)}
    assert f["goodput_requests_s"] == pytest.approx(1.0) and f["good_output_tok_s"] == pytest.approx(22 / 2)
    assert f["met"] is False
    assert slo_figures(recs[:2], {"ttft": 0.1}, 1.0, 1.0)["met"] is True  # 2 of 2 good meets 100 %
    exactly = slo_figures([rec(i, ttft_ms=10 if i < 9 else 500) for i in range(10)], {"ttft": 0.1}, 0.9, 1.0)
    assert exactly["attainment"] == pytest.approx(0.9) and exactly["met"] is True  # ≥, not >
    assert slo_figures([], {"ttft": 0.1}, 0.9, 0.0)["attainment"] is None


def test_requests_abandoned_by_design_are_judged_by_no_target():
    recs = [rec(0, ttft_ms=10), rec(1, ttft_ms=400), rec(2, outcome=Outcome.ABANDONED),
            rec(3, outcome=Outcome.ABANDONED)]
    f = slo_figures(recs, {"ttft": 0.1}, 0.5, window_s=1.0)
    assert (f["scheduled"], f["good"], f["met"]) == (2, 1, True)  # --cancel-fraction closed 2 on purpose
    t = SloTally({"ttft": 0.1})
    assert [t.add(r) for r in recs] == [True, False, False, False] and (t.good, t.ended) == (1, 2)


def test_tally_knows_when_a_miss_is_certain():
    t = SloTally({"ttft": 0.1})
    for i in range(4):
        t.add(rec(i, ttft_ms=500))  # 4 bad of 20 planned: at most 16 / 20 = 80 % can be good
    assert t.attainment == 0 and t.miss_certain(20, 0.8) is False and t.miss_certain(20, 0.81) is True


def test_slo_part_is_built_written_and_read_back():
    recs = [rec(0, ttft_ms=10), rec(1, ttft_ms=400)]
    result = build_cell(CELL, recs, slo=SloConfig({"ttft": 0.1}, 0.5), not_sent=2)
    assert result.slo.scheduled == 4 and result.slo.good == 1 and result.slo.met is False
    data = result.to_json()
    assert data["slo"]["attainment"] == pytest.approx(0.25) and data["slo"]["targets_s"] == {"ttft": 0.1}
    back = from_json(data)
    assert back.slo == result.slo and back.to_json()["slo"] == data["slo"]
    assert "slo" not in build_cell(CELL, recs).to_json()  # no targets, no part


@pytest.mark.parametrize("argv, says", [
    (["--slo", "ttft=fast"], "give a duration with its unit, ms or s"),
    (["--slo", "latency=3s"], "unknown metric 'latency'; choose from ttft, tpot, itl, e2e, ttft_from_intended"),
    (["--slo", "ttft=300ms,ttft=1s"], "ttft is given twice"),
    (["--slo", "ttft=300ms", "--slo-attainment", "0"], "--slo-attainment 0: give a fraction in (0, 1]"),
    (["--slo", "ttft=300ms", "--slo-attainment", "1.5"], "--slo-attainment 1.5: give a fraction in (0, 1]"),
    (["--slo-attainment", "0.9"], "--slo-attainment needs targets"),
    (["search"], "loadgen search needs latency targets: add --slo"),
    (["search", "--slo", "ttft=1s", "--concurrency", "4"], "loadgen search chooses the load itself"),
    (["search", "--slo", "ttft=1s", "--resolution", "wide"], "--resolution 'wide': give a number"),
    (["search", "--slo", "ttft=1s", "--start", "2.5"], "--start 2.5: give a whole number"),
    (["search", "--slo", "ttft=1s", "--max-cells", "1"], "--max-cells 1: a search needs at least 2 cells"),
    (["search", "--slo", "ttft=1s", "--drift-every", "often"], "--drift-every 'often': give end (the control"),
    (["search", "--slo", "ttft=1s", "--drift-every", "-1"], "--drift-every '-1': give end"),
    (["search", "--slo", "ttft=1s", "--probe-min-seconds", "0.5"], "the control probe needs ≥ 1 s"),
])
def test_bad_slo_and_search_input_is_one_line_and_exit_2(cli, argv, says):
    out = cli(*argv)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "started the built-in simulator" not in out.stderr


def cell_with(tok_s: float, met: bool | None, good_tok_s: float) -> CellResult:
    slo = None if met is None else {"met": met, "attainment": 0.95 if met else 0.5, "attainment_required": 0.9,
                                    "good_output_tok_s": good_tok_s}
    return typed({"context_tokens": 60, "concurrency": 32, "status": "ok", "requests": {"ok": 10, "failed": 0},
                  "output_tok_s": tok_s, "slo": slo})


def test_a_cell_that_missed_its_slo_is_never_best_nor_in_the_goodput_verdict():
    fast_but_late = cell_with(9000.0, False, 3000.0)
    steady = cell_with(5000.0, True, 4900.0)
    assert not_best(fast_but_late) == "missed its SLO (attainment 50% < 90%)" and not_best(steady) is None
    slower = cell_with(4000.0, True, 3900.0)
    runs = [compare.Run("late", "a.json", {}, {CellKey(60, 32): fast_but_late}),
            compare.Run("steady", "b.json", {}, {CellKey(60, 32): steady}),
            compare.Run("slower", "c.json", {}, {CellKey(60, 32): slower})]
    rows = compare.comparison(runs)
    assert [r["best"] for r in rows] == [[], ["out_tok_s", "good_tok_s"], []]
    text = compare.compare_table(runs, None)
    assert "good tok/s" in text and "50% MISS" in text and "never best: missed its SLO" in text
    (goodput,) = [v for v in verdicts(runs) if v.objective is Objective.GOOD_TOK_S]
    assert (goodput.decision, goodput.winner, goodput.runner_up) == (Decision.WINS, "steady", "slower")
    assert dict(goodput.ineligible) == {"late": "missed its SLO (attainment 50% < 90%)"}
    assert "goodput (higher is better): steady wins at c=32" in text  # the verdict under the table


def test_oversaturated_needs_latency_climbing_and_throughput_flat_against_the_probe_below():
    # 8 requests of 11 tokens ending over 0.2 s: 440 tok/s; median TTFT 100 ms
    recs = [rec(i, ttft_ms=100, decode_ms=80, sent_ms=i * 15) for i in range(8)]
    span_s = (max(r.t_end_ns for r in recs) - min(r.t_sent_ns for r in recs)) / 1e9
    tok_s = 88 / span_s
    ref = Reference("c=8", 8, tok_s, 0.05)
    assert oversaturated(recs, ref, 16).startswith("TTFT median 50 → 100 ms")  # load ×2, tok/s flat
    assert oversaturated(recs, Reference("c=8", 8, tok_s / 1.2, 0.05), 16) is not None  # +20 % of +100 % load
    assert oversaturated(recs, Reference("c=8", 8, tok_s / 1.35, 0.05), 16) is None  # grew 35 % > 30 %
    assert oversaturated(recs, Reference("c=8", 8, tok_s / 1.1, 0.05), 9) is None  # 9 vs 8: ≤ 8 % allowed
    assert oversaturated(recs, Reference("c=8", 8, tok_s, 0.08), 16) is None  # latency up only 1.25x
    assert oversaturated(recs, None, 16) is None and oversaturated(recs[:7], ref, 16) is None
    assert oversaturated(recs, ref, 16, min_ended=9) is None


def test_live_exporter_serves_running_and_final_attainment():
    exp = LiveExporter("r", slo=SloConfig({"ttft": 0.1}, 0.9))
    exp.cell_started(CELL, "r")
    labels = {"run": "r", "concurrency": "4", "context_tokens": "60", "request_rate": ""}
    warm = rec(9, ttft_ms=500)
    warm.phase = Phase.WARMUP
    for r in (warm, rec(0, ttft_ms=10), rec(1, ttft_ms=10), rec(2, ttft_ms=500)):
        exp.record(r)
    value = exp.registry.get_sample_value
    assert value("loadgen_slo_attainment", labels) == pytest.approx(2 / 3)  # warmup left out
    assert value("loadgen_slo_requests_total", labels | {"good": "true"}) == 2
    assert value("loadgen_slo_requests_total", labels | {"good": "false"}) == 1
    assert value("loadgen_slo_attainment_target", {"run": "r"}) == 0.9
    result = build_cell(CELL, [rec(0, ttft_ms=10), rec(1, ttft_ms=10), rec(2, ttft_ms=500)],
                        slo=SloConfig({"ttft": 0.1}, 0.9), not_sent=1)
    exp.cell_finished(CELL, result)
    assert value("loadgen_slo_attainment", labels) == pytest.approx(0.5)  # 2 of 4 scheduled
    assert value("loadgen_slo_met", labels) == 0
    assert value("loadgen_slo_goodput_requests_per_second", labels) == pytest.approx(result.slo.goodput_requests_s)
    plain = LiveExporter("r2")
    plain.cell_started(CELL, "r2")
    plain.record(rec(0))
    assert plain.registry.get_sample_value("loadgen_slo_attainment_target", {"run": "r2"}) is None


def test_pareto_frontier_keeps_the_points_nothing_beats_in_both():
    pts = [Point("a", 1, 100, 100, None), Point("a", 8, 80, 500, None), Point("b", 8, 70, 450, None),
           Point("b", 32, 40, 900, None), Point("a", 32, 40, 800, None)]
    assert [(p.config, p.concurrency) for p in frontier(pts)] == [("b", 32), ("a", 8), ("a", 1)]


SWEEP = """
reconfigure = ["true"]
[server]
url = "http://127.0.0.1:1"
[matrix]
contexts = [60]
max_tokens = 64
[search]
slo = "ttft=300ms"
start = 4
max_cells = 8
[[configs]]
name = "a"
"""


def test_sweep_search_table_becomes_search_flags():
    spec = parse_spec(tomllib.loads(SWEEP), "s.toml")
    argv = spec.run_argv(spec.configs[0], "out.json")
    assert argv[argv.index("--slo") + 1] == "ttft=300ms" and argv[argv.index("--start") + 1] == "4.0"
    assert spec.settings(spec.configs[0])["slo"] == {"slo": "ttft=300ms"}
    with pytest.raises(Exception, match="concurrency is chosen by"):
        parse_spec(tomllib.loads(SWEEP.replace("max_tokens = 64", "concurrency = [1]")), "s.toml")
    with pytest.raises(Exception, match="slo is missing"):
        parse_spec(tomllib.loads(SWEEP.replace('slo = "ttft=300ms"', "")), "s.toml")


def test_merged_shards_are_judged_over_all_their_requests():
    from loadgen.results.merge import merge_cell
    slo = {"targets_s": {"ttft": 0.1}, "attainment_required": 0.9}
    shards = [[rec(0, ttft_ms=10), rec(1, ttft_ms=500)], [rec(2, ttft_ms=10)]]
    entries = [typed({"slo": slo, "requests_not_sent": 1}), typed({"slo": slo, "requests_not_sent": 0})]
    merged = merge_cell(CELL, entries, shards).slo
    assert (merged.scheduled, merged.good, merged.met) == (4, 2, False)
    assert merged.attainment == pytest.approx(0.5)


def test_slo_column_and_the_wide_goodput_columns():
    from loadgen.report import table
    from loadgen.report.text_table import line
    raw = {"context_tokens": 60, "concurrency": 4, "slo": {"attainment": 0.925, "met": True,
                                                         "goodput_requests_s": 36.74, "good_output_tok_s": 4702.4}}
    cell, missed = typed(raw), typed(raw | {"slo": {"attainment": 0.1}})
    assert "  92% met " in table.row(cell, table.columns([cell]))
    assert " 10% MISS " in table.row(missed, table.columns([missed]))
    assert line(table.goodput_columns(), cell) == "     36.74     4702.4"
