"""LiveExporter: metric values after known records, summaries with holes, and serving on a real socket."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporters.live import LAG_SAMPLE_S, LiveExporter, TokenWeightedHistogram, request_output_rate
from loadgen.record import CellKey, Record
from tests.cells import typed

MS = 1_000_000
CELL = CellKey(context_tokens=60, concurrency=4)
LABELS = {"run": "r1", "concurrency": "4", "context_tokens": "60", "request_rate": ""}


def make_record(**kw) -> Record:
    base = {"run_id": "r1", "cell": CELL, "seq": 0, "t_intended_ns": 10_000 * MS, "t_sent_ns": 10_002 * MS,
            "t_first_token_ns": 10_252 * MS, "t_last_token_ns": 11_252 * MS, "t_end_ns": 11_260 * MS,
            "prompt_tokens": 60, "completion_tokens": 11, "chunks": 3, "chunk_tokens": [1, 4, 6],
            "chunk_gaps_ns": [400 * MS, 600 * MS]}
    return Record(**{**base, **kw})


def value(exp: LiveExporter, name: str, **labels) -> float | None:
    return exp.registry.get_sample_value(name, labels)


@pytest.fixture
def exp() -> LiveExporter:
    e = LiveExporter("r1")
    e.cell_started(CELL, "r1")
    return e


@pytest.mark.unit
def test_ok_request_counts_tokens_and_latencies(exp):
    exp.request_sent(CELL)
    exp.record(make_record())
    assert value(exp, "loadgen_requests_total", outcome="ok", **LABELS) == 1
    assert value(exp, "loadgen_requests_total", outcome="timeout", **LABELS) == 0  # created at zero
    assert value(exp, "loadgen_prompt_tokens_total", **LABELS) == 60
    assert value(exp, "loadgen_output_tokens_total", **LABELS) == 11
    assert value(exp, "loadgen_chunks_total", **LABELS) == 3
    assert value(exp, "loadgen_ttft_seconds_sum", **LABELS) == pytest.approx(0.25)
    assert value(exp, "loadgen_ttft_seconds_bucket", le="0.2", **LABELS) == 0
    assert value(exp, "loadgen_ttft_seconds_bucket", le="0.3", **LABELS) == 1
    assert value(exp, "loadgen_e2e_latency_seconds_sum", **LABELS) == pytest.approx(1.258)
    # (11 - 1) tokens over the 1 s between first and last token
    assert value(exp, "loadgen_request_output_tokens_per_second_sum", **LABELS) == pytest.approx(10.0)
    assert value(exp, "loadgen_send_lateness_seconds_sum", **LABELS) == pytest.approx(0.002)
    assert value(exp, "loadgen_in_flight_requests", run="r1") == 0


@pytest.mark.unit
def test_itl_spreads_each_gap_over_its_chunk_tokens(exp):
    exp.record(make_record())
    # gap 400 ms over 4 tokens = 100 ms each; 600 ms over 6 tokens = 100 ms each
    assert value(exp, "loadgen_itl_seconds_count", **LABELS) == 10
    assert value(exp, "loadgen_itl_seconds_sum", **LABELS) == pytest.approx(1.0)
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.09", **LABELS) == 0
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.1", **LABELS) == 10
    exp.record(make_record(chunk_tokens=[2, 3, 1], chunk_gaps_ns=[30 * MS, 4 * MS]))
    # +3 tokens at 10 ms, +1 token at 4 ms; _sum gets each gap once
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.004", **LABELS) == 1
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.01", **LABELS) == 4
    assert value(exp, "loadgen_itl_seconds_bucket", le="+Inf", **LABELS) == 14
    assert value(exp, "loadgen_itl_seconds_sum", **LABELS) == pytest.approx(1.034)


@pytest.mark.unit
def test_itl_gap_of_an_empty_chunk_moves_to_the_next(exp):
    exp.record(make_record(chunk_tokens=[1, 0, 2], chunk_gaps_ns=[10 * MS, 30 * MS]))
    assert value(exp, "loadgen_itl_seconds_count", **LABELS) == 2
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.02", **LABELS) == 2  # 40 ms / 2 tokens
    assert value(exp, "loadgen_itl_seconds_bucket", le="0.0175", **LABELS) == 0


@pytest.mark.unit
def test_itl_needs_per_chunk_token_counts(exp):
    exp.record(make_record(chunk_tokens=None))
    assert value(exp, "loadgen_itl_seconds_count", **LABELS) == 0  # series exists, nothing observed
    assert value(exp, "loadgen_output_tokens_total", **LABELS) == 11


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200 * MS), st.integers(0, 16)), min_size=1, max_size=40))
def test_itl_conserves_tokens_and_time(chunks):
    h = TokenWeightedHistogram("x_seconds", "x", ("run",), (0.001, 0.01, 0.1))
    e = LiveExporter("r1")
    e.itl = h
    tokens = [1] + [n for _, n in chunks]
    gaps = [g for g, _ in chunks]
    e._observe_itl(("r1",), make_record(chunk_tokens=tokens, chunk_gaps_ns=gaps))
    fam = next(iter(h.collect()))
    samples = {(s.name, s.labels.get("le")): s.value for s in fam.samples}
    # tokens after the first chunk are all counted; time up to the last token-carrying chunk is all summed
    last = max((i for i, n in enumerate(tokens[1:]) if n > 0), default=-1)
    assert samples.get(("x_seconds_count", None), 0) == sum(tokens[1:])
    assert samples.get(("x_seconds_sum", None), 0) == pytest.approx(sum(gaps[: last + 1]) / 1e9)
    cumulative = [samples[("x_seconds_bucket", le)] for le in ("0.001", "0.01", "0.1", "+Inf")] if last >= 0 else []
    assert cumulative == sorted(cumulative)


@pytest.mark.unit
def test_failed_requests_count_but_add_no_tokens(exp):
    exp.record(make_record(outcome="timeout", completion_tokens=None, t_last_token_ns=None))
    exp.record(make_record(outcome="connection_error", t_sent_ns=0, t_first_token_ns=None, chunk_tokens=[],
                           chunk_gaps_ns=[]))
    assert value(exp, "loadgen_requests_total", outcome="timeout", **LABELS) == 1
    assert value(exp, "loadgen_requests_total", outcome="connection_error", **LABELS) == 1
    assert value(exp, "loadgen_output_tokens_total", **LABELS) == 0
    assert value(exp, "loadgen_e2e_latency_seconds_count", **LABELS) == 0
    assert value(exp, "loadgen_ttft_seconds_count", **LABELS) == 1  # the timeout had its first token


@pytest.mark.unit
def test_in_flight_follows_sends_and_ends(exp):
    for _ in range(3):
        exp.request_sent(CELL)
    exp.record(make_record())
    assert value(exp, "loadgen_in_flight_requests", run="r1") == 2
    exp.record(make_record(outcome="cancelled", t_sent_ns=0))  # never sent: not in flight before either
    assert value(exp, "loadgen_in_flight_requests", run="r1") == 2
    exp.close()
    assert value(exp, "loadgen_in_flight_requests", run="r1") == 0


@pytest.mark.unit
def test_cell_gauges_follow_the_current_cell(exp):
    assert value(exp, "loadgen_target_concurrency", run="r1") == 4
    assert value(exp, "loadgen_context_tokens", run="r1") == 60
    assert value(exp, "loadgen_cell_active", **LABELS) == 1
    assert value(exp, "loadgen_target_requests_per_second", run="r1") is None
    nxt = CellKey(context_tokens=1024, concurrency=0, request_rate=2.5)
    nxt_labels = {"run": "r1", "concurrency": "0", "context_tokens": "1024", "request_rate": "2.5"}
    exp.cell_started(nxt, "r1")
    assert value(exp, "loadgen_cell_active", **LABELS) == 0
    assert value(exp, "loadgen_cell_active", **nxt_labels) == 1
    assert value(exp, "loadgen_target_requests_per_second", run="r1") == 2.5
    exp.cell_finished(nxt, typed({"duration_s": 10.0, "requests": {"ok": 20, "failed": 4}}))
    assert value(exp, "loadgen_achieved_requests_per_second", run="r1") == pytest.approx(2.4)
    assert value(exp, "loadgen_cell_active", **nxt_labels) == 0


@pytest.mark.unit
def test_cell_summary_sets_the_last_cell_gauges(exp):
    summary = {
        "output_tok_s": 1234.5,
        "accept_length": {"value": 3.8, "source": "counters"},
        "power": {"mean_w_total": 900.0, "j_per_output_token": 0.73, "output_tokens_per_j": 1.37},
        "client": {"saturated": True, "loop_lag_p99_s": 0.004},
    }
    exp.cell_finished(CELL, typed(summary))
    assert value(exp, "loadgen_accept_length", **LABELS) == 3.8
    assert value(exp, "loadgen_gpu_power_watts", **LABELS) == 900.0
    assert value(exp, "loadgen_energy_per_output_token_joules", **LABELS) == 0.73
    assert value(exp, "loadgen_output_tokens_per_joule", **LABELS) == 1.37
    assert value(exp, "loadgen_cell_output_tokens_per_second", **LABELS) == 1234.5
    assert value(exp, "loadgen_cell_event_loop_lag_p99_seconds", **LABELS) == 0.004
    assert value(exp, "loadgen_client_saturated", run="r1") == 1
    assert value(exp, "loadgen_cell_active", **LABELS) == 0


@pytest.mark.unit
@pytest.mark.parametrize("summary", [
    {},
    {"accept_length": None, "power": None, "client": None, "output_tok_s": None},
    {"accept_length": {"value": None}, "power": {"mean_w_total": float("nan")}, "client": {"saturated": None}},
])
def test_cell_summary_holes_leave_gauges_unset(exp, summary):
    exp.cell_finished(CELL, typed(summary))
    for name in ("loadgen_accept_length", "loadgen_gpu_power_watts", "loadgen_energy_per_output_token_joules",
                 "loadgen_output_tokens_per_joule", "loadgen_cell_output_tokens_per_second"):
        assert value(exp, name, **LABELS) is None, name
    assert value(exp, "loadgen_client_saturated", run="r1") == 0


@pytest.mark.unit
def test_request_output_rate_edges():
    assert request_output_rate(make_record(completion_tokens=1)) is None
    assert request_output_rate(make_record(t_first_token_ns=None)) is None
    assert request_output_rate(make_record(t_last_token_ns=10_252 * MS)) is None
    # without a last-token time the end of the stream stands in
    assert request_output_rate(make_record(t_last_token_ns=None)) == pytest.approx(10 / 1.008)


@pytest.mark.unit
def test_a_new_run_id_replaces_the_run_level_series():
    e = LiveExporter("placeholder")
    e.cell_started(CELL, "r1")
    assert value(e, "loadgen_in_flight_requests", run="placeholder") is None
    assert value(e, "loadgen_client_saturated", run="placeholder") is None
    assert value(e, "loadgen_in_flight_requests", run="r1") == 0
    assert value(e, "loadgen_target_concurrency", run="r1") == 4


@pytest.mark.unit
def test_each_exporter_has_its_own_registry():
    a, b = LiveExporter("a"), LiveExporter("b")
    a.cell_started(CELL, "a")
    a.record(make_record(run_id="a"))
    assert b.registry.get_sample_value("loadgen_requests_total",
                                       {"run": "a", "concurrency": "4", "context_tokens": "60",
                                        "request_rate": "", "outcome": "ok"}) is None
    assert a.registry.get_sample_value("loadgen_requests_total",
                                       {"run": "a", "concurrency": "4", "context_tokens": "60",
                                        "request_rate": "", "outcome": "ok"}) == 1


async def _fetch(port: int, accept: str | None = None) -> tuple[int, str, str]:
    headers = {"Accept": accept} if accept else {}
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics", headers=headers) as r:
        return r.status, r.headers["Content-Type"], await r.text()


@pytest.mark.sim
def test_serves_metrics_on_a_real_socket_and_lingers():
    async def scenario():
        exp = LiveExporter("r1", linger_s=0.5)
        await exp.start()
        assert exp.port > 0
        exp.cell_started(CELL, "r1")
        exp.request_sent(CELL)
        exp.record(make_record())
        status, ctype, text = await _fetch(exp.port)
        assert status == 200 and ctype.startswith("text/plain")
        assert ('loadgen_requests_total{concurrency="4",context_tokens="60",outcome="ok",request_rate="",run="r1"} 1.0'
                in text)
        assert 'loadgen_itl_seconds_count{concurrency="4",context_tokens="60",request_rate="",run="r1"} 10.0' in text
        # Prometheus asks for OpenMetrics; neither format may carry _created series
        om_accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        status, ctype, om = await _fetch(exp.port, om_accept)
        assert ctype.startswith("application/openmetrics-text") and om.rstrip().endswith("# EOF")
        assert "_created" not in text and "_created" not in om
        closing = asyncio.create_task(exp.aclose())
        await asyncio.sleep(0.1)
        status, _, text = await _fetch(exp.port)  # still served during the linger
        assert status == 200 and 'loadgen_in_flight_requests{run="r1"} 0.0' in text
        await closing
        with pytest.raises(aiohttp.ClientConnectionError):
            await _fetch(exp.port)
        return text

    text = asyncio.run(scenario())
    if shutil.which("promtool"):
        lint = subprocess.run(["promtool", "check", "metrics"], check=False, input=text, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.sim
def test_busy_port_raises():
    async def scenario():
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            exp = LiveExporter("r1", port=taken.getsockname()[1])
            with pytest.raises(OSError):
                await exp.start()

    asyncio.run(scenario())


@pytest.mark.sim
def test_event_loop_lag_is_sampled_while_serving():
    """The loop is blocked for a measured `blocked_s`. The sampler was asleep when the block began, due at most
    LAG_SAMPLE_S later, so the next sample wakes at least blocked_s − LAG_SAMPLE_S late: with a 0.3 s block
    that is ≥ 0.2 s, clear of the 0.15 s mark and of the milliseconds a busy machine adds on its own."""
    async def scenario():
        loop = asyncio.get_running_loop()
        exp = LiveExporter("r1", linger_s=0)
        await exp.start()
        await asyncio.sleep(0.15)
        t0 = loop.time()
        time.sleep(0.3)  # noqa: ASYNC251 - block the loop on purpose: the next sample must see it
        blocked_s = loop.time() - t0
        await asyncio.sleep(0.15)
        lag = exp.registry.get_sample_value("loadgen_event_loop_lag_seconds", {"run": "r1"})
        await exp.aclose()
        return lag, blocked_s

    lag, blocked_s = asyncio.run(scenario())
    assert lag >= blocked_s - LAG_SAMPLE_S > 0.15, (lag, blocked_s)


# --- the CLI: flags and the exporter's lifetime around a run ---------------------------------------------

def _parse(*argv: str):
    import argparse

    from loadgen.cli.observe_config import exporter_config
    from loadgen.cli.observe_options import exporter_options, power_limit_options
    from loadgen.config import RunConfig
    p = argparse.ArgumentParser()
    exporter_options(p)
    power_limit_options(p)
    cfg = RunConfig(url=None, exporter=exporter_config(p.parse_args(list(argv))))
    return {k: v for k, v in cfg.public_args().items() if k.startswith(("metrics_", "gpu_power"))}


@pytest.mark.unit
def test_cli_flags_fill_the_run_config():
    assert _parse() == {}
    assert _parse("--metrics-port", "9464") == {"metrics_port": 9464, "metrics_host": "127.0.0.1",
                                                "metrics_linger_s": 10.0, "gpu_power_limit_w": None}
    assert _parse("--metrics-port", "9464", "--gpu-power-limit", "700")["gpu_power_limit_w"] == 700.0
    assert _parse("--metrics-port", "0", "--metrics-host", "0.0.0.0", "--linger", "2")["metrics_linger_s"] == 2.0


@pytest.mark.unit
@pytest.mark.parametrize("argv,message", [
    (["--linger", "5"], "need --metrics-port"),
    (["--metrics-host", "0.0.0.0"], "need --metrics-port"),
    (["--metrics-port", "70000"], "0-65535"),
    (["--metrics-port", "9464", "--linger", "-1"], ">= 0"),
    (["--gpu-power-limit", "700"], "need --metrics-port"),
    (["--metrics-port", "9464", "--gpu-power-limit", "0"], "power limit per GPU in W"),
])
def test_cli_flags_reject_bad_values(argv, message):
    from loadgen.errors import UsageError
    with pytest.raises(UsageError, match=message):
        _parse(*argv)


def _service(port: int, linger_s: float):
    from loadgen.cli.exporter import live_exporter
    from loadgen.config import ExporterConfig
    exporter, service = live_exporter("r9", ExporterConfig(metrics_port=port, metrics_linger_s=linger_s))
    return exporter, service


@pytest.mark.sim
@pytest.mark.parametrize("finished,lingers", [(True, True), (False, False)])
def test_cli_service_serves_during_the_run_and_lingers_unless_interrupted(finished, lingers):
    """A finished run (every cell ok or not) keeps serving --linger seconds; an interrupted or crashed one
    stops at once."""
    async def scenario():
        exporter, service = _service(0, 0.4)
        await service.start()
        seen = {}
        seen["status"], _, seen["text"] = await _fetch(exporter.port)
        t0 = time.monotonic()
        await service.close(finished)
        elapsed = time.monotonic() - t0
        with pytest.raises(aiohttp.ClientConnectionError):
            await _fetch(exporter.port)
        return seen, elapsed

    seen, elapsed = asyncio.run(scenario())
    assert seen["status"] == 200 and 'loadgen_in_flight_requests{run="r9"} 0.0' in seen["text"]
    # the linger is an asyncio sleep of 0.4 s (its timer may fire a clock tick early); no linger is far below
    assert elapsed >= 0.39 if lingers else elapsed < 0.2


@pytest.mark.sim
def test_cli_service_reports_a_busy_port_as_a_usage_error():
    from loadgen.errors import UsageError

    async def scenario():
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            _, service = _service(taken.getsockname()[1], 0)
            with pytest.raises(UsageError, match="cannot listen"):
                await service.start()

    asyncio.run(scenario())


# --- cells and runs identifiable ---------------------------------------------------------------------------

@pytest.mark.unit
def test_open_loop_cells_of_one_prompt_length_have_their_own_series():
    exp = LiveExporter("r1")
    for rate, tok_s in ((20.0, 900.0), (40.0, 1700.0)):
        cell = CellKey(context_tokens=60, concurrency=0, request_rate=rate)
        exp.cell_started(cell, "r1")
        exp.record(make_record(cell=cell))
        exp.cell_finished(cell, typed({"output_tok_s": tok_s}))
    for rate, tok_s in (("20", 900.0), ("40", 1700.0)):
        labels = {"run": "r1", "concurrency": "0", "context_tokens": "60", "request_rate": rate}
        assert value(exp, "loadgen_output_tokens_total", **labels) == 11
        assert value(exp, "loadgen_cell_output_tokens_per_second", **labels) == tok_s


@pytest.mark.unit
def test_run_info_carries_the_label_the_target_and_its_speculative_settings():
    exp = LiveExporter("r1", label="B300_b16t8")
    exp.describe_target({"model": "kimi", "engine": "sglang", "fingerprint": "f00d",
                         "server_info": {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 16,
                                         "speculative_eagle_topk": 8}})
    assert value(exp, "loadgen_run_info", run="r1", label="B300_b16t8", model="kimi", engine="sglang",
                 fingerprint="f00d", spec_algorithm="DDTREE", spec_budget="16", spec_topk="8", spec_draft_tokens="",
                 spec_steps="", spec_block_size="") == 1
    exp.cell_started(CELL, "r2")  # a sweep's next run: one info series, for the current run
    infos = [s for f in exp.registry.collect() if f.name == "loadgen_run_info" for s in f.samples]
    assert [s.labels["run"] for s in infos] == ["r2"]


@pytest.mark.unit
def test_the_power_limit_comes_from_the_flag_else_from_the_telemetry():
    power = {"power": {"source": "nvml", "gpus": 8, "limit_w_total": 5600.0}}
    told = LiveExporter("r1", gpu_power_limit_w=1100.0)
    told.cell_started(CELL, "r1")
    told.cell_finished(CELL, typed(power))
    assert value(told, "loadgen_gpu_power_limit_watts", run="r1", source="flag") == 1100.0
    assert value(told, "loadgen_gpu_power_limit_watts", run="r1", source="nvml") is None
    read = LiveExporter("r1")
    read.cell_started(CELL, "r1")
    assert value(read, "loadgen_gpu_power_limit_watts", run="r1", source="nvml") is None
    read.cell_finished(CELL, typed(power))
    assert value(read, "loadgen_gpu_power_limit_watts", run="r1", source="nvml") == 700.0


@pytest.mark.unit
def test_cells_carry_their_start_and_end_and_the_run_its_end(exp):
    before = time.time()
    nxt = CellKey(context_tokens=60, concurrency=8)
    exp.cell_started(nxt, "r1")
    exp.cell_finished(nxt, typed({"requests": {"ok": 3, "failed": 1}, "ttft_s": {"p99": 0.4}}))
    labels = {**LABELS, "concurrency": "8"}
    start = value(exp, "loadgen_cell_start_timestamp_seconds", **labels)
    end = value(exp, "loadgen_cell_end_timestamp_seconds", **labels)
    assert before <= start <= end <= time.time()
    assert value(exp, "loadgen_cell_ok_requests", **labels) == 3
    assert value(exp, "loadgen_cell_failed_requests", **labels) == 1
    assert value(exp, "loadgen_cell_ttft_p99_seconds", **labels) == 0.4
    assert value(exp, "loadgen_run_active", run="r1") == 1
    exp.close()
    assert value(exp, "loadgen_run_active", run="r1") == 0


@pytest.mark.unit
def test_cell_gpu_figures_and_bottleneck_from_the_summary(exp):
    summary = {"gpu_activity": {"total": {"utilization_percent": 14.0, "sm_clock_fraction": 0.61,
                                          "power_cap_fraction": 0.0, "dram_active": 0.1, "tensor_active": 0.02}},
               "bottleneck": "server_host"}
    exp.cell_finished(CELL, typed(summary))
    assert value(exp, "loadgen_cell_gpu_utilization_percent", **LABELS) == 14.0
    assert value(exp, "loadgen_cell_gpu_sm_clock_per_max_ratio", **LABELS) == 0.61
    assert value(exp, "loadgen_cell_gpu_dram_active_ratio", **LABELS) == 0.1
    assert value(exp, "loadgen_cell_bottleneck", **LABELS, bottleneck="server_host") == 1
    exp.cell_finished(CELL, typed(summary | {"bottleneck": "gpu_power_cap"}))  # measured again: one verdict only
    assert value(exp, "loadgen_cell_bottleneck", **LABELS, bottleneck="server_host") is None
    assert value(exp, "loadgen_cell_bottleneck", **LABELS, bottleneck="gpu_power_cap") == 1


@pytest.mark.unit
def test_a_cell_measured_again_is_part_of_the_run_under_its_own_cell_series(exp):
    """The drift check's control runs under `<run>-control`: still one loadgen_run_info and the run's gauges
    for r1; its figures go to series of their own, beside the first measurement's."""
    exp.cell_finished(CELL, typed({"output_tok_s": 300.0}))
    exp.cell_started(CELL, "r1-control")
    exp.record(make_record(run_id="r1-control"))
    exp.cell_finished(CELL, typed({"output_tok_s": 40.0}))
    infos = [s for f in exp.registry.collect() if f.name == "loadgen_run_info" for s in f.samples]
    assert [s.labels["run"] for s in infos] == ["r1"] and value(exp, "loadgen_run_active", run="r1") == 1
    again = {**LABELS, "run": "r1-control"}
    assert value(exp, "loadgen_cell_output_tokens_per_second", **LABELS) == 300.0
    assert value(exp, "loadgen_cell_output_tokens_per_second", **again) == 40.0
    assert value(exp, "loadgen_requests_total", outcome="ok", **again) == 1
    assert value(exp, "loadgen_requests_total", outcome="ok", **LABELS) == 0
    assert value(exp, "loadgen_cell_active", **again) == 0
