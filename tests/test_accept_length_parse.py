"""The pure parts of the server-metrics source, as tables: summing counters over label sets, one reading per
DP group for scheduler gauges, counter resets, and the gauge's time average from its first refresh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadgen.target.engine_detect import engine_from_metrics
from loadgen.telemetry.engine_metrics import SG_GAUGE, SG_QUEUE, SG_RUNNING, counter_totals, gauge_values
from loadgen.telemetry.promtext import parse_samples
from loadgen.telemetry.server_metrics import CounterDelta, ServerMetricsSource

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "samples" / "sglang-metrics.txt"


def g(name: str, value: float, **labels: str) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"sglang:{name}{{{text}}} {value}"


def test_the_shipped_sglang_sample_parses():
    if not SAMPLE.exists():
        # CI checks ../shared out beside the clone: there a missing sample is a broken checkout, not a skip
        assert os.environ.get("CI", "").lower() != "true", f"CI=true but {SAMPLE} is missing"
        pytest.skip(f"{SAMPLE} not present (outside CI the shared samples are optional)")
    samples = parse_samples(SAMPLE.read_text())
    totals = counter_totals(samples)
    assert totals["sglang:spec_verify_calls_total"] == 17.0
    assert gauge_values(samples)[SG_GAUGE] == 0.0


@pytest.mark.parametrize("lines, gen, verify", [
    # is_streaming label sets are summed
    ([g("generation_tokens_total", 100, is_streaming="true"), g("generation_tokens_total", 20, is_streaming="false"),
      g("spec_verify_calls_total", 30)], 120, 30),
    # DP ranks are summed (never read one rank only)
    ([g("generation_tokens_total", 100, dp_rank="0"), g("generation_tokens_total", 300, dp_rank="1"),
      g("spec_verify_calls_total", 25, dp_rank="0"), g("spec_verify_calls_total", 75, dp_rank="1")], 400, 100),
    # priority "" is the total: the per-priority series are not added again
    ([g("generation_tokens_total", 90, priority=""), g("generation_tokens_total", 60, priority="1"),
      g("generation_tokens_total", 30, priority="2"), g("spec_verify_calls_total", 45)], 90, 45),
])
def test_counter_totals(lines, gen, verify):
    totals = counter_totals(parse_samples("\n".join(lines) + "\n"))
    assert totals == {"sglang:generation_tokens_total": gen, "sglang:spec_verify_calls_total": verify}


def test_gauges_one_reading_per_dp_group():
    tp8 = [g("num_running_reqs", 8, tp_rank=str(r)) for r in range(8)]  # TP ranks repeat one scheduler
    assert gauge_values(parse_samples("\n".join(tp8) + "\n"))[SG_RUNNING] == 8
    dp2 = [g("num_running_reqs", 6, dp_rank="0", tp_rank="0"), g("num_running_reqs", 2, dp_rank="1", tp_rank="4"),
           g("num_queue_reqs", 1, dp_rank="0", tp_rank="0"), g("num_queue_reqs", 3, dp_rank="1", tp_rank="4"),
           g("spec_accept_length", 4.0, dp_rank="0", tp_rank="0"),
           g("spec_accept_length", 2.0, dp_rank="1", tp_rank="4")]
    v = gauge_values(parse_samples("\n".join(dp2) + "\n"))
    assert v[SG_RUNNING] == 8 and v[SG_QUEUE] == 4
    assert v[SG_GAUGE] == pytest.approx((4.0 * 6 + 2.0 * 2) / 8)  # weighted by each group's running requests


def test_counter_reset_counts_from_zero():
    c = CounterDelta()
    for value in (100, 150, 20, 50):  # restarted between 150 and 20
        c.add(value)
    assert c.delta == 50 + 20 + 30 and c.resets == 1


def test_gauge_time_average_starts_at_first_refresh():
    src = ServerMetricsSource("http://127.0.0.1:1/metrics")
    ms = 1_000_000
    readings = [(0, 9.0), (100, 9.0), (200, 9.0), (300, 3.0), (400, 3.0), (700, 5.0)]  # stale 9.0 until t=300
    for t, v in readings:
        src.ingest(parse_samples(g("spec_accept_length", v) + "\n" + g("num_running_reqs", 4) + "\n"), t * ms)
    res = src.result()
    assert res.values["gauge"]["readings_ignored"] == 3 and res.values["gauge"]["readings_used"] == 3
    # each reading stands for the interval before it: 3.0 over (200,300], 3.0 over (300,400], 5.0 over (400,700]
    assert res.values["per_source"]["gauge"] == pytest.approx((3.0 * 100 + 3.0 * 100 + 5.0 * 300) / 500)
    assert res.values["unavailable"]["counters"].startswith("the server exports neither")


@pytest.mark.parametrize("text, engine", [
    ("# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n",
     "vllm"),
    ("# HELP sglang:num_running_reqs x\nsglang:num_running_reqs{tp_rank=\"0\"} 0\n", "sglang"),
    ("# a comment only\npython_gc_objects_collected_total{generation=\"0\"} 1\n", None),
])
def test_engine_from_metric_prefixes(text, engine):
    assert engine_from_metrics(text) == engine
