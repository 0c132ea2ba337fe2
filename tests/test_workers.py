"""--workers N: the same requests, totals and figures as one process, from real worker processes against the
simulator; the merged client verdict; the worker count rule; an interrupt accounted for with workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from loadgen.cli.checks import parse_workers
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.cell import summarize
from loadgen.metrics.client_health import merge_client
from loadgen.parallel.dispatch import prefetch
from loadgen.parallel.workers import auto_workers
from loadgen.record import Record
from tests.conftest import ROOT, run_loadgen
from tests.faults_util import assert_accounted

ARGS = ("--contexts", "60", "--max-tokens", "48", "--requests-per-cell", "32", "--server-metrics", "off")


def _run(sim, tmp_path, name: str, *extra: str):
    out = tmp_path / f"{name}.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "1,8", *ARGS, "--out", str(out), *extra, timeout=90)
    assert proc.returncode == 0, proc.stderr
    return read_json(str(out)), read_jsonl(str(out)[:-5] + ".requests.jsonl"), proc


@pytest.mark.sim
def test_workers_send_what_one_process_sends(sim_factory, tmp_path):
    sim = sim_factory("--speed", "10")
    one_doc, one, _ = _run(sim, tmp_path, "one")
    doc, recs, proc = _run(sim, tmp_path, "two", "--workers", "2", "--warmup", "2")
    # every planned request once (warmup included), the same sequence numbers per cell as one process sends
    seqs = Counter((r["cell"]["concurrency"], r["seq"]) for r in recs)
    assert set(seqs.values()) == {1}
    assert {k for k in seqs} == {(c, s) for c in (1, 8) for s in range(34)}
    assert {(r["cell"]["concurrency"], r["seq"]) for r in one} == {(c, s) for c in (1, 8) for s in range(32)}
    assert sum(r["phase"] == "warmup" for r in recs) == 4
    assert all(r["outcome"] == "ok" for r in recs)
    # the work was spread over both workers in the wide cell; the 1-slot cell used one worker
    assert {r["worker"] for r in recs if r["cell"]["concurrency"] == 8} == {1, 2}
    assert {r["worker"] for r in recs if r["cell"]["concurrency"] == 1} == {1}
    truth = {t["rid"]: t for t in sim.truth_rows()}
    for cell_one, cell in zip(one_doc["cells"], doc["cells"]):
        # the same totals as one process ...
        assert cell["requests"] == cell_one["requests"] == {"ok": 32, "failed": 0, "cancelled": 0, "by_outcome": {"ok": 32}}
        assert cell["output_tokens"] == cell_one["output_tokens"] == 32 * 48
        assert cell["prompt_tokens_mean"] == cell_one["prompt_tokens_mean"] == 60
        # ... and every figure is the summary of the merged raw records (exact percentiles, not averaged)
        measured = [Record.from_dict(r) for r in recs
                    if r["phase"] == "measure" and r["cell"]["concurrency"] == cell["concurrency"]]
        again = summarize(measured)
        for key in ("ttft_s", "itl_s", "e2e_s", "tpot_s", "request_tok_s", "output_tok_s", "duration_s"):
            assert cell[key] == again[key], key
        assert cell["client"]["workers"] == (2 if cell["concurrency"] == 8 else 1)
        slots = [w["slots"] for w in cell["client"]["per_worker"]]
        assert slots == ([4, 4] if cell["concurrency"] == 8 else [1])
    # each worker's records agree with the server, token for token
    for r in recs:
        assert r["chunk_tokens"] == truth[r["request_id"]]["chunk_tokens"]


@pytest.mark.sim
def test_interrupt_with_workers_accounts_for_every_request(sim_factory, tmp_path):
    sim = sim_factory("--speed", "2")
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "--url", sim.url, "--concurrency", "8",
                             "--contexts", "60", "--max-tokens", "64", "--requests-per-cell", "400",
                             "--server-metrics", "off", "--workers", "2", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = str(out)[:-5] + ".requests.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # interrupt once the load runs
        try:
            if len(read_jsonl(records)) >= 16:
                break
        except OSError:
            pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=40)
    assert proc.returncode == 130, err
    doc, recs = read_json(str(out)), read_jsonl(records)
    assert_accounted(doc, recs, 400)
    assert 16 <= len(recs) < 400
    assert all(r["outcome"] == "ok" for r in recs)  # the first interrupt lets requests in flight finish


@pytest.mark.sim
def test_a_dead_worker_costs_records_not_the_run(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8")
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "--url", sim.url, "--concurrency", "8,4",
                             "--contexts", "60", "--max-tokens", "32", "--requests-per-cell", "300",
                             "--server-metrics", "off", "--workers", "2", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = str(out)[:-5] + ".requests.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill worker 2 once it has sent some requests
        try:
            if sum(r["worker"] == 2 for r in read_jsonl(records)) >= 8:
                break
        except OSError:
            pass
        time.sleep(0.05)
    os.kill(child_of(proc.pid, b"loadgen.parallel.worker\x002"), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err  # the cut cell failed; the run went on and wrote everything
    doc, recs = read_json(str(out)), read_jsonl(records)
    assert_accounted(doc, recs, 300)
    first, second = doc["cells"]
    assert first["status"] == "failed" and "worker 2 exited during the cell (exit code -9)" in first["error"]
    lost = [r for r in recs if r["outcome"] == "cancelled"]
    assert lost and all(r["worker"] == 2 and "with the request in flight" in r["error"] for r in lost)
    # the next cell ran in the main process
    assert second["status"] == "ok" and second["requests"]["ok"] == 300
    assert {r["worker"] for r in recs if r["cell"]["concurrency"] == 4} == {0}


def child_of(pid: int, marker: bytes) -> int:
    """The child process of `pid` whose command line contains `marker` (NUL-separated arguments)."""
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        for child in fh.read().split():
            with open(f"/proc/{child}/cmdline", "rb") as cmd:
                if marker in cmd.read():
                    return int(child)
    raise AssertionError(f"no child of {pid} runs {marker!r}")


@pytest.mark.unit
def test_auto_workers_rule():
    assert auto_workers(128, cores=16) == 1
    assert auto_workers(256, cores=16) == 1
    assert auto_workers(257, cores=16) == 2
    assert auto_workers(1024, cores=16) == 4
    assert auto_workers(8192, cores=16) == 15  # cores − 1
    assert auto_workers(4096, cores=2) == 1  # no spare core: one process, flagged if it saturates
    assert parse_workers("auto") == "auto" and parse_workers("3") == 3
    assert prefetch(1) == 2 and prefetch(64) == 8 and prefetch(4096) == 64


@pytest.mark.unit
def test_merged_client_verdict():
    parent = {"loop_lag_p99_s": 0.001, "cpu_percent": 20.0, "saturated": False, "reasons": []}
    w1 = {"worker": 1, "slots": 4, "lags": [0.001] * 50 + [0.002] * 50, "loop_lag_p99_s": 0.002,
          "cpu_percent": 40.0, "saturated": False, "reasons": []}
    w2 = {"worker": 2, "slots": 4, "lags": [0.030] * 100, "loop_lag_p99_s": 0.030, "cpu_percent": 95.0,
          "saturated": True, "reasons": ["event-loop lag p99 30.0 ms > 10 ms", "client CPU 95% > 90%"]}
    calm = merge_client(parent, [w1])
    assert calm["saturated"] is False and calm["cpu_percent"] == 40.0 and calm["cpu_percent_total"] == 60.0
    assert calm["loop_lag_p99_s"] == pytest.approx(0.002, abs=1e-5)
    hot = merge_client(parent, [w1, w2])
    assert hot["saturated"] is True and hot["cpu_percent"] == 95.0 and hot["workers"] == 2
    assert hot["reasons"] == ["worker 2: event-loop lag p99 30.0 ms > 10 ms",
                              "worker 2: client CPU 95% > 90%"]
    # p99 over the raw samples of both workers (200 values), not an average of their p99s
    assert hot["loop_lag_p99_s"] == pytest.approx(0.030)
