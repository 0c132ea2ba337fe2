"""The fault matrix: each simulator fault × each API, on real sockets, loadgen as a real subprocess.

For every fault: every sent request has exactly one record, records + requests not sent = planned, the
record's outcome is the one the fault calls for, and each record matches the simulator's ground-truth row
of the same request id (the faults the simulator applied to it are in that row)."""

from __future__ import annotations

import time

import pytest

from tests.conftest import run_loadgen
from tests.faults_util import assert_accounted, jsonl_lines, outputs, streamed, wait_truth

pytestmark = [pytest.mark.sim, pytest.mark.untimed]  # nothing here is timed against the machine

APIS = ("openai-chat", "openai-completions", "sglang-generate")
# every API on the default client (h1), and the aiohttp client (--http-client aiohttp) on one API
CASES = [(api, "h1") for api in APIS] + [("openai-chat", "aiohttp")]
IDS = [f"{api}-{client}" for api, client in CASES]
PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions",
         "sglang-generate": "/generate"}
PLANNED = 16
MAX_TOKENS = 48


def measure(sim, api: str, tmp_path, *extra: str, client: str = "h1"):
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--api", api, "--http-client", client, "--concurrency", "4",
                       "--contexts", "60", "--max-tokens", str(MAX_TOKENS), "--requests-per-cell", str(PLANNED),
                       "--out", str(out), "--server-metrics", "off", *extra, timeout=60)
    return proc, out


def faulted_cell(sim, api, tmp_path, *extra, client):
    """Run one cell against a faulty simulator: the run ends normally, every scheduled request has exactly one
    record, and the records and the simulator's truth rows are the same requests. (doc, records, truth by id)"""
    # every fault leaves the cell usable here: the accounting is under test, not the failed-cell verdict
    proc, out = measure(sim, api, tmp_path, "--max-failed-fraction", "1", *extra, client=client)
    assert proc.returncode == 0, proc.stderr
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    assert len(records) == PLANNED
    # the truth rows of streams loadgen gave up on are written when the simulator sees it hang up
    truth = streamed(wait_truth(sim, lambda rows: sum(r["stream"] for r in rows) >= PLANNED))
    assert set(truth) == {r["request_id"] for r in records}
    return doc, records, truth


def ok_matches_truth(rec: dict, row: dict) -> None:
    assert rec["outcome"] == "ok", rec["error"]
    assert row["outcome"] == "ok"
    assert rec["completion_tokens"] == row["completion_tokens"] == MAX_TOKENS
    assert rec["chunk_tokens"] == row["chunk_tokens"]


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_http_errors(api, client, sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--http-error-rate", "0.3", "--fault-seed", "3")
    doc, records, truth = faulted_cell(sim, api, tmp_path, client=client)
    failed = [r for r in records if "http_error" in truth[r["request_id"]]["faults"]]
    assert 0 < len(failed) < PLANNED
    for rec in records:
        row = truth[rec["request_id"]]
        if rec in failed:
            assert rec["outcome"] == "http_error" and rec["status"] == 503
            assert rec["error"].startswith('HTTP 503: {"object":"error","message":"simulated server error')
            assert row["outcome"] == "http_error" and row["status"] == 503
        else:
            ok_matches_truth(rec, row)
    assert doc["cells"][0]["requests"]["by_outcome"] == {"ok": PLANNED - len(failed), "http_error": len(failed)}


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_malformed_chunks(api, client, sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--malformed-every", "40")
    doc, records, truth = faulted_cell(sim, api, tmp_path, client=client)
    bad = {rid for rid, row in truth.items() if "malformed" in row["faults"]}
    assert 0 < len(bad) < PLANNED
    for rec in records:
        row = truth[rec["request_id"]]
        if rec["request_id"] in bad:
            assert rec["outcome"] == "protocol_error"
            assert rec["error"].startswith("event is not JSON: b'{\"choices\": [{\"delta\": {\"content\": \"x\"'")
            # every route counts tokens in every event here (/generate's meta_info; the simulator honours
            # continuous_usage_stats): what arrived before the bad event (nothing when it was the first)
            partial = sum(rec["chunk_tokens"]) or None
            assert rec["completion_tokens"] == partial
        else:
            ok_matches_truth(rec, row)


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_stalled_streams_time_out_idle(api, client, sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--stall-after", "12", "--stall-every", "3")
    doc, records, truth = faulted_cell(sim, api, tmp_path, "--idle-timeout", "0.4", client=client)
    stalled = {rid for rid, row in truth.items() if "stall" in row["faults"]}
    assert 0 < len(stalled) < PLANNED
    late_s = doc["cells"][0]["client"]["loop_lag_p99_s"]  # how late this client's loop ran timers, measured
    for rec in records:
        row = truth[rec["request_id"]]
        if rec["request_id"] in stalled:
            assert rec["outcome"] == "timeout"
            assert rec["error"].startswith("idle timeout (0.4 s) after ")
            assert row["outcome"] == "client_disconnected"
            # the tokens that did arrive before the stall are recorded chunk by chunk
            assert rec["chunk_tokens"] == row["chunk_tokens"] and sum(row["chunk_tokens"]) >= 12
            assert rec["completion_tokens"] == sum(row["chunk_tokens"])  # the running count of what arrived
            # the idle timer fires on time, later only as far as the client's loop lagged in this cell
            assert 0.4 - 0.15 <= (rec["t_end_ns"] - rec["t_last_token_ns"]) / 1e9 <= 0.4 + 0.15 + late_s
        else:
            ok_matches_truth(rec, row)


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_total_timeout(api, client, sim_factory, tmp_path):
    sim = sim_factory("--speed", "8")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--api", api, "--http-client", client, "--concurrency", "4",
                       "--contexts", "60", "--max-tokens", "20000", "--requests-per-cell", "8", "--timeout", "0.3", "--out", str(out),
                       "--server-metrics", "off", timeout=60)
    assert proc.returncode == 1, proc.stderr  # no request succeeded: the cell failed
    doc, records = outputs(out)
    assert_accounted(doc, records, 8)
    assert [r["outcome"] for r in records] == ["timeout"] * 8
    late_s = doc["cells"][0]["client"]["loop_lag_p99_s"]  # how late this client's loop ran timers, measured
    for rec in records:
        assert rec["error"].startswith("total timeout (0.3 s) after ")
        assert rec["chunks"] > 0
        assert rec["completion_tokens"] == sum(rec["chunk_tokens"])  # the running count of what arrived
        # on time (aiohttp counts from before the send is stamped: a few ms early), later only as far as the
        # client's loop lagged in this cell
        assert 0.3 - 0.1 <= (rec["t_end_ns"] - rec["t_sent_ns"]) / 1e9 <= 0.3 + 0.1 + late_s
    truth = streamed(wait_truth(sim, lambda rows: sum(r["stream"] for r in rows) >= 8))
    assert set(truth) == {r["request_id"] for r in records}
    assert {row["outcome"] for row in truth.values()} == {"client_disconnected"}
    assert doc["cells"][0]["status"] == "failed"
    assert doc["cells"][0]["error"] == "no request succeeded (8 failed)"


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_crash_mid_cell(api, client, sim_factory, tmp_path):
    # the readiness gate's 3 generations and the probe come first; the 9th measured request makes the simulator
    # die like an OOM kill
    sim = sim_factory("--speed", "8", "--crash-after", "12")
    proc, out = measure(sim, api, tmp_path, client=client)
    assert proc.returncode == 1, proc.stderr
    assert sim.proc.wait(5) == -9
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    cell = doc["cells"][0]
    assert cell["status"] == "failed"
    assert cell["error"].startswith("the server went away: ")
    truth = streamed(wait_truth(sim, lambda rows: True))
    ok = [r for r in records if r["outcome"] == "ok"]
    # what the server finished is exactly what loadgen counts as ok; the rest died with the server
    assert {r["request_id"] for r in ok} == set(truth)
    for rec in ok:
        ok_matches_truth(rec, truth[rec["request_id"]])
    failed = [r for r in records if r["outcome"] != "ok"]
    assert failed and {r["outcome"] for r in failed} == {"connection_error"}
    # 8 measured requests were served; with 4 slots, the 9th went out once at least 5 had ended, and those
    # still streaming died with the server
    assert 5 <= len(ok) <= 8 and len(records) >= 9
    assert cell["requests_not_sent"] == PLANNED - len(records) > 0


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_stale_health_is_refused_before_any_load(api, client, sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--stale-health")
    # --wait-ready 0: by default a stale server is waited for (test_wait_ready.py); here it is refused at once
    proc, out = measure(sim, api, tmp_path, "--wait-ready", "0", client=client)
    assert proc.returncode == 2
    # the server's answer on the lines above: the error stays one line within 120 columns
    *above, error = proc.stderr.splitlines()
    assert error == f"loadgen: error: a 1-token probe to {PATHS[api]}: HTTP 503 (above); run again once it generates"
    assert " ".join(" ".join(above).split()) == (
        "the probe's answer: HTTP 503: {\"object\":\"error\",\"message\":\"The server is not ready: generation is "
        "failing (--stale-health)\",\"type\":\"BadRequestError\",\"code\":503}")
    assert all(len(line) <= 120 for line in proc.stderr.splitlines())
    assert jsonl_lines(out) == []
    truth = wait_truth(sim, lambda rows: len(rows) >= 3)
    # three probes, each refused; not one measured request
    assert [(r["stream"], r["outcome"], r["faults"]) for r in truth.values()] == \
        [(False, "http_error", ["stale_health"])] * 3


@pytest.mark.parametrize("api,client", CASES, ids=IDS)
def test_slow_start_probe_waits_it_out(api, client, sim_factory, tmp_path):
    slow_s = 1.5
    t_started_ns = time.monotonic_ns()
    sim = sim_factory("--speed", "8", "--slow-start", str(slow_s))
    t_ready_ns = time.monotonic_ns()  # the simulator's clock started between these two: a busy machine widens them
    proc, out = measure(sim, api, tmp_path, client=client)
    assert proc.returncode == 0, proc.stderr
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    truth = wait_truth(sim, lambda rows: sum(r["stream"] for r in rows) >= PLANNED)
    for row in truth.values():
        at_most_s, at_least_s = ((row["t_arrival_ns"] - t) / 1e9 for t in (t_started_ns, t_ready_ns))
        if at_most_s < slow_s - 0.3:
            assert row["faults"] == ["slow_start"] and row["status"] == 503 and not row["stream"]
        elif at_least_s > slow_s:
            assert row["outcome"] == "ok"
    rows = streamed(truth)
    assert set(rows) == {r["request_id"] for r in records}
    for rec in records:
        ok_matches_truth(rec, rows[rec["request_id"]])


def test_stale_health_hanging_generation_is_refused(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--stale-health", "--broken-mode", "hang")
    proc, out = measure(sim, "openai-chat", tmp_path, "--idle-timeout", "0.3", "--wait-ready", "0")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "the probe's answer: SocketTimeoutError: Timeout on reading data from socket",
        "loadgen: error: a 1-token probe to /v1/chat/completions: no answer (above); run again once it generates"]
    assert jsonl_lines(out) == []
    truth = wait_truth(sim, lambda rows: len(rows) >= 3)
    assert [(r["outcome"], r["faults"]) for r in truth.values()] == [("client_disconnected", ["stale_health"])] * 3


def test_crash_above_running_requests(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--crash-above", "3")
    proc, out = measure(sim, "openai-chat", tmp_path)
    assert proc.returncode == 1
    assert sim.proc.wait(5) == -9
    assert "above 3 (--crash-above)" in sim.proc.stderr.read().decode()
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    assert doc["cells"][0]["status"] == "failed"
    assert {r["outcome"] for r in records} == {"connection_error"}  # 4 at once: nothing ever finished
    assert streamed(wait_truth(sim, lambda rows: True)) == {}
