"""Results that describe themselves (each cell's wall-clock edges, the run's environment, run id and label on
every record, the label with the matrix), and runs that measured different things refused side by side, all
from real runs against the simulator."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.report.compare import Run
from loadgen.results.comparable import mismatches
from tests.conftest import ROOT, run_loadgen

pytestmark = pytest.mark.sim

ARGS = ("--concurrency", "2", "--contexts", "60", "--requests-per-cell", "4", "--server-metrics", "off")


def _run(sim, tmp_path, name: str, *extra: str):
    out = tmp_path / f"{name}.json"
    proc = run_loadgen("--url", sim.url, *ARGS, "--label", name, "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_results_say_where_and_when_they_were_measured(sim_factory, tmp_path):
    sim = sim_factory("--speed", "10")
    before = time.time()
    out, proc = _run(sim, tmp_path, "base", "--max-tokens", "16")
    after = time.time()
    doc = read_json(str(out))
    env = doc["environment"]
    assert env["python"].count(".") == 2 and env["cpu_count"] >= 1 and env["platform"]
    assert env["loadgen_version"] == doc["loadgen_version"]
    if (ROOT / ".git").exists():  # run from this checkout
        assert len(env["git"]["commit"]) == 40 and isinstance(env["git"]["modified"], bool)
    cell = doc["cells"][0]
    wall = cell["wall_clock"]
    assert before <= wall["start_unix_s"] < wall["end_unix_s"] <= after
    assert wall["end_unix_s"] - wall["start_unix_s"] == pytest.approx(cell["duration_s"], abs=1e-6)
    assert datetime.fromisoformat(wall["start"].replace("Z", "+00:00")).timestamp() == pytest.approx(
        wall["start_unix_s"], abs=1e-3)
    assert wall["start"].endswith("Z")
    records = read_jsonl(str(out)[:-5] + ".requests.jsonl")
    assert records and all(r["run_id"] == doc["run_id"] and r["label"] == "base" for r in records)
    # the matrix names its run and label, live on stderr and at the end on stdout
    assert f"run {doc['run_id']}  label base" in proc.stdout.splitlines()[0]
    assert f"run {doc['run_id']}  label base" in proc.stderr


def test_compare_refuses_runs_that_measured_different_things(sim_factory, tmp_path):
    sim = sim_factory("--speed", "10")
    a, _ = _run(sim, tmp_path, "long", "--max-tokens", "16")
    b, _ = _run(sim, tmp_path, "short", "--max-tokens", "8", "--temperature", "0.5")
    refused = run_loadgen("compare", str(a), str(b))
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "max tokens: long=16, short=8" in refused.stderr and "temperature: long=0.0, short=0.5" in refused.stderr
    assert "--allow-mismatch" in refused.stderr
    allowed = run_loadgen("compare", str(a), str(b), "--allow-mismatch")
    assert allowed.returncode == 0, allowed.stderr
    lines = allowed.stdout.splitlines()
    assert lines[0] == "warning: runs differ (--allow-mismatch): max tokens: long=16, short=8"
    assert lines[1] == "warning: runs differ (--allow-mismatch): temperature: long=0.0, short=0.5"
    assert lines[2].split()[:3] == ["ctx", "conc", "configuration"]
    # the same runs measured alike compare without a word
    c, _ = _run(sim, tmp_path, "again", "--max-tokens", "16")
    same = run_loadgen("compare", str(a), str(c))
    assert same.returncode == 0 and "warning" not in same.stdout + same.stderr
    # the rule is one function, which the HTML report calls too
    docs = [Run(p.stem, str(p), read_json(str(p))) for p in (a, b, c)]
    assert mismatches([docs[0], docs[2]]) == []
    assert [line.split(":")[0] for line in mismatches(docs)] == ["max tokens", "temperature"]
