"""Accept length per cell from every source, against the simulator's exact truth, over real sockets and
processes: per-request details, server counters, the windowed gauge, live log lines and client chunks."""

from __future__ import annotations

import shlex
import sys

import pytest

from loadgen.files import read_json, read_jsonl
from tests.conftest import run_loadgen

pytestmark = pytest.mark.sim

SOURCES = ("per_request", "counters", "gauge", "log", "chunks")
BOGUS = "[2020-01-01 00:00:00 TP0] Decode batch, #running-req: 8, #token: 1, token usage: 0.00, " \
        "accept len: 99.00, accept rate: 0.99, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n"


def truth_accept(sim, out) -> dict:
    """Per cell (context, concurrency): Σ completion_tokens / Σ verify_ct of its measured requests (truth)."""
    truth = {t["rid"]: t for t in sim.truth_rows()}
    sums: dict = {}
    for r in read_jsonl(str(out)[:-5] + ".requests.jsonl"):
        if r["phase"] != "measure":
            continue
        t = truth[r["request_id"]]
        key = (r["cell"]["context_tokens"], r["cell"]["concurrency"])
        tok, ver = sums.get(key, (0, 0))
        sums[key] = (tok + t["completion_tokens"], ver + t["verify_ct"])
    return {k: tok / ver for k, (tok, ver) in sums.items()}


def measure(sim_factory, tmp_path, budget: int, *extra: str, concurrency: str = "8") -> tuple[dict, dict, str]:
    log = tmp_path / f"sim-{budget}.log"
    log.write_text(BOGUS * 5)  # lines from before the run: the log source must not count them
    sim = sim_factory("--speed", "8", "--budget", str(budget), "--log-file", str(log), name=f"truth-{budget}.jsonl")
    out = tmp_path / f"r{budget}.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", concurrency, "--contexts", "60", "--max-tokens", "256",
                       "--requests-per-cell", "48", "--telemetry-interval", "0.05",
                       "--accept-log-cmd", f"tail -n +1 -s 0.05 -F {shlex.quote(str(log))}", "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return read_json(str(out)), truth_accept(sim, out), proc.stdout


def test_every_source_matches_truth_and_budgets_differ(sim_factory, tmp_path):
    values = {}
    for budget in (8, 16):
        doc, truth, table = measure(sim_factory, tmp_path, budget)
        (cell,) = doc["cells"]
        true = truth[(60, 8)]
        acc = cell["accept_length"]
        assert acc["source"] == "per_request"
        assert acc["unavailable"] == {}
        assert set(acc["per_source"]) == set(SOURCES)
        for src in SOURCES:
            assert acc["per_source"][src] == pytest.approx(true, rel=0.02), (budget, src, acc["per_source"], true)
        # counters cover exactly the cell's requests: the same sums as the truth
        sg = cell["telemetry"]["server_metrics"]["sglang"]
        assert sg["generation_tokens"] / sg["verify_calls"] == pytest.approx(true, rel=1e-9)
        assert "disagreement" not in acc
        assert cell["telemetry"]["accept_log"]["lines"] > 0
        assert f"{acc['value']:.2f}" in table  # the default table shows the value; --wide its source too
        values[budget] = true
        assert doc["target"]["spec"]["speculative_ddtree_budget"] == budget
    assert values[16] > values[8] * 1.3  # budget 16 accepts markedly more (model: ≈6.1 vs ≈3.8)


def test_unavailable_sources_say_why_not_zero(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8")
    out = tmp_path / "off.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "4", "--contexts", "60", "--max-tokens", "64",
                       "--requests-per-cell", "8", "--server-metrics", "off", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (cell,) = read_json(str(out))["cells"]
    acc = cell["accept_length"]
    assert set(acc["per_source"]) == {"per_request", "chunks"}
    assert acc["unavailable"]["counters"] == acc["unavailable"]["gauge"] == "--server-metrics off"
    assert "--accept-log-cmd" in acc["unavailable"]["log"]
    # an explicit URL that does not answer: refused before any load (a source lost mid-run: its reason and
    # a warning line, test_telemetry_checks.py)
    dead = tmp_path / "dead.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "4", "--contexts", "60", "--max-tokens", "64",
                       "--requests-per-cell", "8", "--server-metrics", "http://127.0.0.1:9/metrics",
                       "--telemetry-interval", "0.2", "--out", str(dead))
    assert proc.returncode == 2 and "--server-metrics http://127.0.0.1:9/metrics: cannot reach it" in proc.stderr


def test_vllm_counters_and_no_gauge(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--budget", "8", "--engine", "vllm")
    out = tmp_path / "vllm.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "8", "--contexts", "60", "--max-tokens", "256",
                       "--requests-per-cell", "32", "--telemetry-interval", "0.05", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = read_json(str(out))
    assert doc["target"]["engine"] == "vllm"
    assert doc["target"]["server_info"]["version"].endswith("-sim")
    true = truth_accept(sim, out)[(60, 8)]
    (cell,) = doc["cells"]
    acc = cell["accept_length"]
    assert acc["source"] == "counters"  # vLLM returns no per-request SGLang details
    assert acc["value"] == pytest.approx(true, rel=0.02)
    assert acc["per_source"]["chunks"] == pytest.approx(true, rel=0.02)
    assert "per_request" in acc["unavailable"] and "vLLM" in acc["unavailable"]["gauge"]
    v = cell["telemetry"]["server_metrics"]["vllm"]
    assert v["draft_tokens"] == 8 * v["drafts"]  # num_speculative_tokens = budget
    assert v["accept_rate"] == pytest.approx((acc["value"] - 1) / 8, rel=1e-9)


def test_disagreeing_sources_are_flagged(sim_factory, tmp_path):
    """A log command that reports nonsense: the best source still wins, and the table says they disagree."""
    sim = sim_factory("--speed", "8")
    liar = (f"{sys.executable} -c \"import time; time.sleep(0.35)\nwhile True: "
            f"print('Decode batch, #running-req: 8, accept len: 9.00', flush=True); time.sleep(0.01)\"")
    out = tmp_path / "liar.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "4", "--contexts", "60", "--max-tokens", "256",
                       "--requests-per-cell", "32", "--accept-log-cmd", liar, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (cell,) = read_json(str(out))["cells"]
    acc = cell["accept_length"]
    assert acc["source"] == "per_request" and acc["per_source"]["log"] == 9.0
    assert "log=9.00" in acc["disagreement"]
    assert "sources disagree" in proc.stdout
