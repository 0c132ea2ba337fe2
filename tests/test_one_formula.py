"""One formula per figure: the same records through the results path (`summarize`, the client-health merges)
and through a real LiveExporter (values read back with `registry.get_sample_value`) give the same ITL
(zero-token chunks included), per-request tok/s, TTFT/E2E/lateness, achieved request rate and client-health
verdict; the weighted percentile matches its former hand-written definition on a table of inputs."""

from __future__ import annotations

import asyncio
import random
import time

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from exporters.live import LiveExporter
from exporters.live_metrics import ITL_BUCKETS_S
from loadgen.metrics.cell import summarize
from loadgen.metrics.client_health import merge_client
from loadgen.metrics.open_loop import achieved_request_rate
from loadgen.metrics.request import itl_pairs, request_tok_s
from loadgen.metrics.stats import weighted_distribution, weighted_percentile
from loadgen.record import CellKey, Record
from loadgen.results.merge import merge_client as merge_shard_clients
from loadgen.run.monitor import LoopMonitor
from tests.cells import typed

MS = 1_000_000
CLOSED = CellKey(context_tokens=60, concurrency=4)
OPEN = CellKey(context_tokens=60, concurrency=0, request_rate=10.0)


def make(cell: CellKey, seq: int, **kw) -> Record:
    t0 = 10_000 * MS + seq * 100 * MS
    base = {"run_id": "r1", "cell": cell, "seq": seq, "t_intended_ns": t0, "t_sent_ns": t0 + 2 * MS,
            "t_first_token_ns": t0 + 252 * MS, "t_last_token_ns": t0 + 1_252 * MS, "t_end_ns": t0 + 1_260 * MS,
            "prompt_tokens": 60, "completion_tokens": 11, "chunks": 3, "chunk_tokens": [1, 4, 6],
            "chunk_gaps_ns": [400 * MS, 600 * MS]}
    return Record(**{**base, **kw})


RECORDS = [
    make(CLOSED, 0, completion_tokens=4, chunk_tokens=[1, 0, 3], chunk_gaps_ns=[10 * MS, 30 * MS],
         t_last_token_ns=10_292 * MS),
    make(CLOSED, 1),
    # a zero-token chunk in the middle and one at the end (its gap belongs to no token)
    make(CLOSED, 2, completion_tokens=6, chunks=5, chunk_tokens=[2, 3, 0, 1, 0],
         chunk_gaps_ns=[30 * MS, 4 * MS, 6 * MS, 9 * MS]),
    make(CLOSED, 3, t_last_token_ns=None),  # written before t_last_token existed: t_end stands in
    make(CLOSED, 4, completion_tokens=1, chunks=1, chunk_tokens=[1], chunk_gaps_ns=[]),
]


def live(records: list[Record], cell: CellKey, summary: dict | None = None) -> LiveExporter:
    exp = LiveExporter("r1", registry=CollectorRegistry(auto_describe=True))
    exp.cell_started(cell, "r1")
    for r in records:
        exp.request_sent(cell)
        exp.record(r)
    if summary is not None:
        exp.cell_finished(cell, typed(summary))
    return exp


def sample(exp: LiveExporter, name: str, cell: CellKey = CLOSED, **extra) -> float | None:
    labels = {"run": "r1", "concurrency": str(cell.concurrency), "context_tokens": str(cell.context_tokens),
              "request_rate": "" if cell.request_rate is None else f"{cell.request_rate:g}"}
    return exp.registry.get_sample_value(name, labels | extra)


@pytest.mark.unit
def test_a_zero_token_chunk_hands_its_gap_to_the_next_chunk_in_both_paths():
    rec = RECORDS[0]  # tokens [1, 0, 3], gaps [10 ms, 30 ms]: 3 tokens over 40 ms
    summary, exp = summarize([rec]), live([rec], CLOSED)
    assert summary["itl_s"]["mean"] == summary["itl_s"]["p50"] == pytest.approx(0.040 / 3)
    assert sample(exp, "loadgen_itl_seconds_count") == 3
    assert sample(exp, "loadgen_itl_seconds_sum") / 3 == pytest.approx(0.040 / 3)
    assert sample(exp, "loadgen_itl_seconds_bucket", le="0.0125") == 0
    assert sample(exp, "loadgen_itl_seconds_bucket", le="0.015") == 3
    # the weighted mean of ITL is the request's time per output token
    assert summary["itl_s"]["mean"] == pytest.approx(summary["tpot_s"]["mean"])


@pytest.mark.unit
def test_itl_agrees_bucket_by_bucket_and_in_the_mean():
    ok = [r for r in RECORDS if r.chunk_tokens is not None]
    summary, exp = summarize(ok), live(ok, CLOSED)
    pairs = [p for r in ok for p in zip(*itl_pairs(r))]
    for bound in ITL_BUCKETS_S:
        expected = sum(n for v, n in pairs if v <= bound)
        assert sample(exp, "loadgen_itl_seconds_bucket", le=repr(bound)) == expected, bound
    count = sample(exp, "loadgen_itl_seconds_count")
    assert count == sum(n for _, n in pairs) == 3 + 10 + 4 + 10
    assert sample(exp, "loadgen_itl_seconds_sum") / count == pytest.approx(summary["itl_s"]["mean"])


@pytest.mark.unit
def test_per_request_rate_agrees_with_and_without_a_last_token_time():
    summary, exp = summarize(RECORDS), live(RECORDS, CLOSED)
    rates = [x for x in map(request_tok_s, RECORDS) if x is not None]
    assert len(rates) == 4  # the 1-token request has no decode rate
    assert request_tok_s(RECORDS[3]) == pytest.approx(10 / 1.008)
    assert sample(exp, "loadgen_request_output_tokens_per_second_count") == len(rates)
    assert sample(exp, "loadgen_request_output_tokens_per_second_sum") / len(rates) == \
        pytest.approx(summary["request_tok_s"]["mean"])


@pytest.mark.unit
@pytest.mark.parametrize("figure,metric", [("ttft_s", "loadgen_ttft_seconds"),
                                           ("e2e_s", "loadgen_e2e_latency_seconds")])
def test_request_latencies_agree(figure, metric):
    summary, exp = summarize(RECORDS), live(RECORDS, CLOSED)
    assert sample(exp, metric + "_count") == len(RECORDS)
    assert sample(exp, metric + "_sum") == pytest.approx(summary[figure]["mean"] * len(RECORDS))


@pytest.mark.unit
def test_send_lateness_agrees_and_an_unsent_request_has_none():
    recs = [make(CLOSED, i, t_sent_ns=make(CLOSED, i).t_intended_ns + i * MS) for i in range(4)]
    recs.append(make(CLOSED, 9, outcome="connection_error", t_sent_ns=0, t_first_token_ns=None))
    summary, exp = summarize(recs), live(recs, CLOSED)
    assert summary["send_lateness_s"]["max"] == pytest.approx(0.003)
    assert sample(exp, "loadgen_send_lateness_seconds_count") == 4
    assert sample(exp, "loadgen_send_lateness_seconds_sum") == pytest.approx(0.006)
    assert summary["send_lateness_s"]["p50"] == pytest.approx(0.0015)


@pytest.mark.unit
def test_achieved_request_rate_is_the_results_figure():
    # 5 requests due every 100 ms; the last two sent late, stretching the sends over 600 ms
    sent_ms = [0, 100, 200, 450, 600]
    recs = []
    for i, ms in enumerate(sent_ms):
        r = make(OPEN, i)
        recs.append(make(OPEN, i, t_intended_ns=10_000 * MS + i * 100 * MS, t_sent_ns=10_000 * MS + ms * MS,
                         t_first_token_ns=10_000 * MS + ms * MS + 50 * MS,
                         t_last_token_ns=10_000 * MS + ms * MS + 90 * MS,
                         t_end_ns=10_000 * MS + ms * MS + 100 * MS, chunk_gaps_ns=r.chunk_gaps_ns))
    summary = summarize(recs)
    assert summary["achieved_request_rate"] == achieved_request_rate(recs) == pytest.approx(4 / 0.6)
    assert summary["schedule_request_rate"] == pytest.approx(4 / 0.4)
    exp = live(recs, OPEN, summary)
    assert exp.registry.get_sample_value("loadgen_achieved_requests_per_second", {"run": "r1"}) == \
        summary["achieved_request_rate"]
    assert "achieved_request_rate" not in summarize(RECORDS)  # closed-loop cells have no target rate


PARENT = {"loop_lag_p99_s": 0.001, "cpu_percent": 20.0, "saturated": False, "reasons": []}
CALM = {"worker": 1, "slots": 4, "lags": [0.001] * 99 + [0.004], "loop_lag_p99_s": 0.001, "cpu_percent": 40.0,
        "saturated": False, "reasons": []}
HOT = {"worker": 2, "slots": 4, "lags": [0.030] * 100, "loop_lag_p99_s": 0.030, "cpu_percent": 95.0,
       "saturated": True, "reasons": ["event-loop lag p99 30.0 ms > 10 ms", "client CPU 95% > 90%"]}


@pytest.mark.unit
@pytest.mark.parametrize("workers,saturated", [([CALM], False), ([CALM, HOT], True)])
def test_client_health_verdict_is_the_results_verdict(workers, saturated):
    summary = summarize(RECORDS)
    summary["client"] = merge_client(PARENT, workers)
    assert summary["client"]["saturated"] is saturated
    exp = live(RECORDS, CLOSED, summary)
    assert exp.registry.get_sample_value("loadgen_client_saturated", {"run": "r1"}) == float(saturated)
    assert sample(exp, "loadgen_cell_event_loop_lag_p99_seconds") == summary["client"]["loop_lag_p99_s"]


@pytest.mark.unit
def test_workers_and_shards_merge_client_health_by_one_rule():
    bare = [{k: v for k, v in b.items() if k != "lags"} for b in (CALM, HOT)]
    by_workers = merge_client(None, bare)
    by_shards = merge_shard_clients(bare)
    for key in ("loop_lag_p99_s", "cpu_percent", "cpu_percent_total", "saturated"):
        assert by_workers[key] == by_shards[key], key
    assert by_shards["loop_lag_p99_s"] == 0.030 and by_shards["cpu_percent_total"] == 135.0
    assert by_shards["reasons"] == ["shard 1: " + r for r in HOT["reasons"]]
    # with raw samples the p99 is taken over all of them, never from the blocks' own p99s
    assert merge_client(None, [CALM])["loop_lag_p99_s"] == pytest.approx(np.percentile(CALM["lags"], 99))


@pytest.mark.sim
def test_the_exporter_and_the_cell_monitor_see_the_same_blocked_loop():
    async def scenario():
        exp = LiveExporter("r1", linger_s=0, registry=CollectorRegistry())
        await exp.start()
        monitor = LoopMonitor(interval_s=0.05)
        monitor.start()
        await asyncio.sleep(0.12)
        for _ in range(3):  # blocked three times: one stall alone does not make a client saturated
            time.sleep(0.2)  # noqa: ASYNC251 - block the loop on purpose: both samplers must see it
            await asyncio.sleep(0.12)
        lag = exp.registry.get_sample_value("loadgen_event_loop_lag_seconds", {"run": "r1"})
        verdict = await monitor.stop()
        await exp.aclose()
        return lag, max(monitor.lags), verdict

    exporter_lag, monitor_lag, verdict = asyncio.run(scenario())
    assert exporter_lag >= 0.1 and monitor_lag >= 0.1  # each sleeps ≤ 0.1 s of the 0.2 s block
    assert verdict["saturated"] and "event-loop lag" in verdict["reasons"][0]


# ---- the weighted percentile: numpy's inverted CDF, as the former hand-written search ----------------------
def searched_percentile(values, weights, q):
    """The former implementation: the smallest value whose cumulative weight reaches q % of the total."""
    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    idx = int(np.searchsorted(cum, q / 100.0 * cum[-1], side="left"))
    return float(v[min(idx, len(v) - 1)])


@pytest.mark.unit
@pytest.mark.parametrize("values,weights,q,expected", [
    ([0.01], [3], 50, 0.01),
    ([0.01, 0.02], [1, 1], 50, 0.01),  # cumulative weight 1 of 2 reaches 50 % exactly at the first value
    ([0.01, 0.02], [1, 1], 51, 0.02),
    ([0.02, 0.01], [1, 3], 75, 0.01),  # unsorted input: 0.01 carries 3 of 4
    ([0.02, 0.01], [1, 3], 76, 0.02),
    ([0.1, 0.2, 0.3], [2, 5, 3], 0, 0.1),
    ([0.1, 0.2, 0.3], [2, 5, 3], 20, 0.1),
    ([0.1, 0.2, 0.3], [2, 5, 3], 21, 0.2),
    ([0.1, 0.2, 0.3], [2, 5, 3], 70, 0.2),
    ([0.1, 0.2, 0.3], [2, 5, 3], 70.1, 0.3),
    ([0.1, 0.2, 0.3], [2, 5, 3], 100, 0.3),
    ([0.005, 0.005, 0.001], [4, 4, 2], 20, 0.001),
    ([0.005, 0.005, 0.001], [4, 4, 2], 99, 0.005),
])
def test_weighted_percentile_table(values, weights, q, expected):
    assert weighted_percentile(values, weights, q) == expected == searched_percentile(values, weights, q)


@pytest.mark.unit
def test_weighted_percentile_equals_the_former_search_on_random_inputs():
    rnd = random.Random(5)
    for _ in range(500):
        k = rnd.randint(1, 9)
        values = [rnd.choice([0.001, 0.002, 0.01, rnd.random()]) for _ in range(k)]
        weights = [rnd.randint(1, 8) for _ in range(k)]
        dist = weighted_distribution(values, weights, (1, 10, 25, 50, 90, 99, 100))
        for q in (1, 10, 25, 50, 90, 99, 100):
            assert dist[f"p{q}"] == weighted_percentile(values, weights, q) == searched_percentile(values, weights, q)


@pytest.mark.unit
def test_weighted_percentile_of_nothing_is_none():
    assert weighted_percentile([], [], 50) is None
    assert weighted_distribution([], []) == {"mean": None, "p50": None, "p90": None, "p99": None, "samples": 0}
