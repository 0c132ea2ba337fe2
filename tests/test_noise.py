"""Noise: confidence intervals that cover the truth at their level, deterministic; "best" only beyond them and
never for a saturated cell; repeats combined into a mean with Student's t interval; the saturation verdict
independent of a cell's length and its advice fitted to the case; a default table that fits 120 columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.metrics import client_health, confidence
from loadgen.metrics.cell_noise import cell_intervals
from loadgen.metrics.stats import percentile
from loadgen.record import CellKey, Record
from loadgen.report import compare, table
from loadgen.report.text_table import Column
from loadgen.results.cell_result import from_json
from loadgen.results.cell_status import not_best
from loadgen.results.incidents import IncidentKind
from loadgen.results.repeats import combine_repeats
from tests.cells import typed

pytestmark = pytest.mark.unit
SEEDS = 400


def _coverage(draw, truth: float, interval, seeds: int = SEEDS) -> float:
    hits = 0
    for seed in range(seeds):
        low, high = interval(draw(np.random.default_rng(10_000 + seed)))
        hits += low <= truth <= high
    return hits / seeds


def test_bootstrap_intervals_cover_the_true_figure_about_95_percent_of_the_time():
    # mean of a normal, median of an exponential (ln 2 · scale), ratio of sums (tokens / seconds at a known rate)
    def mean(x):
        return confidence.bootstrap_interval([x], confidence.STATISTICS["mean"], resamples=400)

    def median(x):
        return confidence.bootstrap_interval([x], confidence.STATISTICS["p50"], resamples=400)
    assert 0.91 <= _coverage(lambda g: g.normal(10.0, 2.0, 64), 10.0, mean, 200) <= 0.99
    assert 0.91 <= _coverage(lambda g: g.exponential(3.0, 101), 3.0 * math.log(2), median, 200) <= 0.99

    def tokens_and_seconds(g):
        seconds = g.uniform(0.5, 1.5, 80)
        return g.normal(100.0 * seconds, 10.0), seconds
    assert 0.91 <= _coverage(tokens_and_seconds, 100.0, lambda ts: confidence.ratio_interval(*ts), 200) <= 0.99


def test_t_interval_over_repeats_covers_the_true_mean_at_its_level():
    # at 3 and at 10 repeats: the t quantiles of 2 and 9 degrees of freedom are right, or coverage is off
    assert 0.93 <= _coverage(lambda g: g.normal(5.0, 1.0, 3), 5.0, confidence.repeat_interval, 3000) <= 0.97
    assert 0.93 <= _coverage(lambda g: g.normal(5.0, 1.0, 10), 5.0, confidence.repeat_interval, 3000) <= 0.97


def test_intervals_are_deterministic_and_need_two_samples():
    x = np.random.default_rng(1).normal(0, 1, 500)
    assert confidence.statistic_interval(x, "mean") == confidence.statistic_interval(list(x), "mean")
    assert confidence.statistic_interval([1.0], "mean") is None and confidence.repeat_interval([1.0]) is None
    assert confidence.repeat_interval([2.0, 2.0, 2.0]) == [2.0, 2.0]
    low, high = confidence.repeat_interval([100.0, 110.0, 120.0])
    assert (low + high) / 2 == pytest.approx(110.0) and (high - low) / 2 == pytest.approx(4.303 * 10 / math.sqrt(3))


def _record(seq: int, tokens: int, sent_s: float, ttft_s: float, e2e_s: float, verify: int) -> Record:
    ns = 1_000_000_000
    return Record("r", CellKey(60, 2), seq, t_sent_ns=int(sent_s * ns), t_first_token_ns=int((sent_s + ttft_s) * ns),
                  t_end_ns=int((sent_s + e2e_s) * ns), completion_tokens=tokens, chunks=tokens // 4 + 1,
                  spec={"spec_verify_ct": verify})


def test_cell_intervals_hold_each_figure_and_are_exact_when_every_request_is_alike():
    # two slots, each request 100 tokens in 1 s: output 200 tok/s over a 5 s window, accept length 100 / 25
    same = [_record(i, 100, i // 2, 0.1, 1.0, 25) for i in range(10)]
    found = cell_intervals(same, 5.0, "per_request")
    assert found["output_tok_s"] == pytest.approx([200.0, 200.0])
    assert found["ttft_s.p50"] == pytest.approx([0.1, 0.1]) and found["e2e_s.mean"] == pytest.approx([1.0, 1.0])
    assert found["accept_length.value"] == pytest.approx([4.0, 4.0])
    assert "accept_length.value" not in cell_intervals(same, 5.0, "counters")  # one server value: no interval
    spread = [_record(i, 100 + 10 * (i % 3), i // 2, 0.05 + 0.01 * i, 1.0, 25) for i in range(10)]
    found = cell_intervals(spread, 5.0, "per_request")
    point = sum(r.completion_tokens for r in spread) / 5.0
    assert found["output_tok_s"][0] < point < found["output_tok_s"][1]
    assert found["ttft_s.p50"][0] <= percentile([0.05 + 0.01 * i for i in range(10)], 50) <= found["ttft_s.p50"][1]


def _row(config: str, value: float, interval=None, saturated: bool = False) -> dict:
    cell = {"context_tokens": 60, "concurrency": 8, "requests": {"ok": 10, "failed": 0}, "output_tok_s": value,
            "intervals": {"output_tok_s": interval} if interval else {},
            "client": {"saturated": saturated, "reasons": ["event-loop lag p99 21.0 ms > 10 ms"] if saturated else []}}
    return cell | {"config": config}


def _marks(*cells: dict) -> dict:
    runs = [compare.Run(c["config"], c["config"] + ".json", {}, {compare.cell_key(c): typed(c)}) for c in cells]
    return {r["config"]: ("best" if "out_tok_s" in r["best"] else "noise" if "out_tok_s" in r["noise"] else "")
            for r in compare.comparison(runs)}


def test_best_only_beyond_noise_and_the_resolution_and_never_saturated():
    """The verdict's rule (`verdict.decide`): the leader's margin's 95 % interval clear of 0 and the margin ≥ 2 %."""
    assert _marks(_row("a", 100, [95, 105]), _row("b", 120, [110, 130])) == {"a": "", "b": "best"}
    # overlapping intervals can still hold a margin beyond noise: +20 % with its interval +4.8 % … +37 %
    assert _marks(_row("a", 100, [90, 111]), _row("b", 120, [110, 130])) == {"a": "", "b": "best"}
    assert _marks(_row("a", 100, [80, 125]), _row("b", 120, [110, 130])) == {"a": "noise", "b": "noise"}
    assert _marks(_row("a", 100), _row("b", 100)) == {"a": "noise", "b": "noise"}  # a tie is no win
    assert _marks(_row("a", 100), _row("b", 103)) == {"a": "", "b": "best"}  # no intervals: exact values
    assert _marks(_row("a", 100), _row("b", 101)) == {"a": "noise", "b": "noise"}  # +1 %: below the resolution
    # the saturated cell is fastest but never best, and no margin is taken against it: the one eligible
    # configuration left is alone, not best of anything
    assert _marks(_row("a", 100, [95, 105]), _row("b", 150, [140, 160], saturated=True)) == {"a": "", "b": ""}
    assert _marks(_row("a", 100, [95, 105]), _row("c", 130, [125, 135]),
                  _row("b", 150, [140, 160], saturated=True)) == {"a": "", "b": "", "c": "best"}


def test_not_best_names_a_saturated_or_failed_cell():
    assert not_best(typed(_row("a", 1))) is None
    assert not_best(typed(_row("a", 1, saturated=True))) == "client saturated: event-loop lag p99 21.0 ms > 10 ms"
    noted = dict(_row("a", 1), incidents=[{"kind": "client_saturated", "reason": "x"}])
    assert not_best(typed(noted)).startswith("client saturated")
    assert not_best(typed(dict(_row("a", 1), status="failed", error="boom"))) == "boom"


def test_saturation_advice_fits_the_case():
    advice = client_health.saturation_advice
    assert "one stream cannot be split over --workers" in advice(1, False, 1, 16)
    assert advice(64, False, 1, 16).startswith("add --workers auto")
    assert advice(64, False, 4, 16).startswith("raise --workers (now 4")
    assert "--shard" in advice(64, False, 15, 16) and "every core but one" in advice(64, False, 15, 16)
    assert "open-loop" in advice(0, True, 1, 16)
    assert advice(64, False, 1, 16, busy_wait_s=4.31).startswith("other processes kept its loop waiting 4.3 s")
    lagging = {"saturated": True, "reasons": ["event-loop lag p99 60.1 ms > 10 ms"], "lag_total_s": 0.8,
               "runqueue_wait_s": 0.6}
    assert client_health.machine_busy(lagging)  # most of the lateness was waiting for a core
    assert not client_health.machine_busy(lagging | {"runqueue_wait_s": 0.1})  # the loop blocked itself
    assert not client_health.machine_busy(lagging | {"runqueue_wait_s": None})
    assert not client_health.machine_busy(lagging | {"reasons": [*lagging["reasons"], "client CPU 95% > 90%"]})
    note = table.notes(typed({"context_tokens": 60, "concurrency": 1,
                              "client": {"saturated": True, "cpu_percent": 95.0, "reasons": ["client CPU 95% > 90%"]}}))
    assert note.startswith("CLIENT SATURATED (client CPU 95% > 90%): one stream") and "add --workers" not in note


def _lags(samples: int, stalls: int, stall_s: float = 0.020) -> list[float]:
    return [stall_s] * stalls + [0.001] * (samples - stalls)


def _lag_verdict(lags: list[float]) -> bool:
    return client_health.client_verdict(percentile(lags, 99), 10.0, None, client_health.late_lags(lags))["saturated"]


def test_one_stall_does_not_flag_a_short_cell_and_a_lasting_lag_flags_any():
    # the old rule (p99 alone) judged the same two 20 ms stalls saturated in a 7 s cell (140 samples at 50 ms)
    # and not in a 13 s one (250): the p99 of 140 samples lies between the two largest
    assert percentile(_lags(140, 2), 99) > client_health.LAG_P99_LIMIT_S > percentile(_lags(250, 2), 99)
    assert not _lag_verdict(_lags(140, 2)) and not _lag_verdict(_lags(250, 2))
    assert _lag_verdict(_lags(140, 5)) and _lag_verdict(_lags(250, 5)) and _lag_verdict(_lags(2000, 40))
    pooled = client_health.combine([("worker 0", {"lags": _lags(140, 2)}), ("worker 1", {"lags": _lags(140, 0)})])
    assert pooled["saturated"] is False


def _repeat(out: float, ok: int, saturated: bool = False) -> dict:
    return {"context_tokens": 60, "concurrency": 2, "requests": {"ok": ok, "failed": 0, "by_outcome": {"ok": ok}},
            "output_tok_s": out, "ttft_s": {"p50": out / 1000, "p99": 1.0, "samples": ok},
            "client": {"saturated": saturated, "reasons": ["x"] if saturated else []},
            "incidents": [{"kind": "client_saturated", "reason": "x"}] if saturated else []}


def test_repeats_combine_into_the_mean_with_a_t_interval():
    result = combine_repeats([from_json(_repeat(100.0, 8)), from_json(_repeat(110.0, 8, True)),
                              from_json(_repeat(120.0, 8))])
    cell = result.to_json()
    assert cell["output_tok_s"] == pytest.approx(110.0) and cell["ttft_s"]["p50"] == pytest.approx(0.110)
    assert cell["requests"] == {"ok": 24, "failed": 0, "cancelled": 0, "by_outcome": {"ok": 24}}
    assert cell["repeats"]["n"] == 3 and cell["repeats"]["values"]["output_tok_s"] == [100.0, 110.0, 120.0]
    half = 4.303 * 10 / math.sqrt(3)
    assert cell["intervals"]["output_tok_s"] == pytest.approx([110.0 - half, 110.0 + half])
    assert cell["interval_method"]["method"] == "t over repeats"
    assert any(i["kind"] == "client_saturated" for i in cell["incidents"])  # one saturated repeat: the cell's
    assert not_best(result) is not None
    assert "±" in table.progress_line(result, "cell 1/1")


def _wide_cell(ctx: int, conc: int) -> dict:
    return {"context_tokens": ctx, "concurrency": conc, "requests": {"ok": 123456, "failed": 65432},
            "output_tok_s": 1234567.8, "request_tok_s": {"mean": 12345.6, "p10": 9999.9, "samples": 10},
            "ttft_s": {"mean": 123.4, "p50": 99.9, "p99": 1234.5, "samples": 10}, "e2e_s": {"mean": 1234.56},
            "accept_length": {"value": 12.34, "source": "per_request"},
            "power": {"mean_w_total": 12345.0, "j_per_output_token": 123.456},
            "intervals": {"output_tok_s": [1234000.0, 1235000.0]}, "status": "failed",
            "error": "a long reason " * 20, "warnings": ["TELEMETRY LOST: " + "x" * 300]}


def test_default_table_fits_120_columns_with_room_for_two_more():
    cells = [typed(_wide_cell(131072, 1024)), typed(_wide_cell(60, 1))]
    text = table.table(cells, table.title("a-long-label", "20261201T000000-abcdef"))
    assert max(len(line) for line in text.splitlines()) <= 120, text
    assert "n1 ctx 131072 conc 1024, ctx 60 conc 1: FAILED" in text  # one note below the rows, naming both
    extra = [Column(name, 8, lambda c: "100.0%") for name in ("SLO", "garbage")]  # GPU% is in COLUMNS already
    columns = [*table.COLUMNS[:-1], *extra, table.COLUMNS[-1]]
    default = {**table.DEFAULT, "SLO": 65, "garbage": 65}
    fitted = _fitted(cells, columns, default, 120)
    # the TTFT headers' unit ("TTFT p50 ms") took 4 columns: rows whose every text overflows keep two of the three
    # 8-wide columns of GPU%'s priority, the rightmost of the tie goes
    assert {"SLO", "GPU%", "ctx", "conc", "out tok/s", "±95%"} <= {c.header for c in fitted}
    narrow = [c.header for c in _fitted(cells, table.COLUMNS, table.DEFAULT, 80)]
    assert "J/tok" not in narrow and "E2E s" not in narrow and {"ctx", "conc", "out tok/s"} <= set(narrow)
    wide = table.table(cells, wide=True).splitlines()[0]
    assert all(c.header in wide for c in table.COLUMNS)


def _fitted(cells, columns, default, width) -> list[Column]:
    text = table.table(cells, width=width, candidates=columns, priorities=default)
    assert max(len(line) for line in text.splitlines()) <= width, text
    return table.default_columns(cells, width, columns, default)


def test_a_cell_whose_repeats_were_cut_short_is_measured_again_on_resume():
    done = from_json(_repeat(100.0, 8))
    cut = from_json(_repeat(90.0, 3))
    cut.add(IncidentKind.INTERRUPTED, "stopped early: 1 of 3 repeats measured")
    assert combine_repeats([done]).finished and not combine_repeats([done, cut]).finished
