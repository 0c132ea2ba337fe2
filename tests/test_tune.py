"""`loadgen tune` end to end: a real process, the simulator restarted per configuration by the sweep tests'
reconfigure script (tests/fixtures/sim_reconfigure.py, a new accept-length seed each launch) on a free loopback port.

The simulator's true speed is a known function (loadgen/sim/model.py: the accept length and the step time of the
roofline); its closed-loop output tok/s at concurrency c is `tests/spec_truth.closed_loop_tok_s` (renewal-reward:
each request's prefill iteration, its verify steps with the last one cut, the slot's empty iteration), so each
answer is checked against the truth, not against another measurement."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loadgen.results.schema_doc import DOCUMENT_FIELDS, TUNE_FIELDS, VERDICT_FIELDS
from loadgen.sim.model import Roofline, SpecConfig, mean_accept_length
from tests.spec_truth import SpecServer, closed_loop_tok_s

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = str(ROOT / "tests" / "fixtures" / "sim_reconfigure.py")
MAX_TOKENS, REQUESTS, LOADS = 64, 64, (1, 4)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def true_tok_s(budget: int, topk: int, concurrency: int) -> float:
    """The simulator's output tok/s at speed 1 (a speed factor scales every configuration alike)."""
    spec, roof = SpecConfig(budget=budget, topk=topk), Roofline()
    server = SpecServer(mean_accept_length(spec), min(spec.block_size, budget + 1), roof.base_s * 1000,
                        roof.per_req_s * (budget + 1) / 9 * 1000, roof.prefill_s_per_token * 1e6)
    return closed_loop_tok_s(server, concurrency, MAX_TOKENS, 60)


class Bench:
    """A temp folder with a tune file, the reconfigure script's state, and the simulators it started."""

    def __init__(self, tmp: Path):
        self.tmp, self.port = tmp, free_port()
        self.state, self.out = tmp / "state", tmp / "out"

    def write(self, configs: list[tuple[str, int, int, int]], requests: int = REQUESTS) -> Path:
        text = f"""
name = "t"
reconfigure = ["{sys.executable}", "{FIXTURE}", "{self.state}", "{self.port}", "--seed-per-launch", "1", "--",
               "--budget", "{{budget}}", "--topk", "{{topk}}", "--speed", "4", "--crash-above", "{{crash_above}}"]
diagnostics = ["{sys.executable}", "{FIXTURE}", "{self.state}", "{self.port}", "--diagnose"]

[server]
url = "http://127.0.0.1:{self.port}"

[readiness]
timeout_s = 20
poll_s = 0.05
successes = 2

[expect]
speculative_ddtree_budget = "{{budget}}"
speculative_eagle_topk = "{{topk}}"

[matrix]
contexts = [60]
max_tokens = {MAX_TOKENS}
requests_per_cell = {requests}
concurrency = [{", ".join(map(str, LOADS))}]

[tune]
"""
        text += "".join(f'\n[[configs]]\nname = "{n}"\nbudget = {b}\ntopk = {t}\ncrash_above = {crash}\n'
                        for n, b, t, crash in configs)
        path = self.tmp / "tune.toml"
        path.write_text(text)
        return path

    def argv(self, command: str, path: Path, out: Path) -> list[str]:
        return [sys.executable, "-m", "loadgen", command, str(path), "--out-dir", str(out)]

    def tune(self, path: Path, timeout: float = 150) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv("tune", path, self.out), check=False, capture_output=True, text=True,
                              timeout=timeout, cwd=self.tmp)

    def doc(self, name: str, out: Path | None = None) -> dict[str, Any]:
        return json.loads(((out or self.out) / f"{name}.json").read_text())

    def records(self, name: str, out: Path | None = None) -> list[dict[str, Any]]:
        path = (out or self.out) / f"{name}.requests.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def launches(self) -> int:
        runs = self.state / "runs"
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    def stop(self) -> None:
        try:
            os.kill(int((self.state / "sim.pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


@pytest.fixture
def bench(tmp_path):
    b = Bench(tmp_path)
    yield b
    time.sleep(0.05)
    b.stop()


NO_CRASH = 10_000
# budget × top-k, less b4t4, plus an exact twin of b32t8 (the best at c=4) and b64t1, which dies at c=4
GRID = [(f"b{b}t{t}", b, t, 2 if (b, t) == (64, 1) else NO_CRASH) for b in (4, 8, 16, 32, 64) for t in (1, 4, 8)
        if (b, t) != (4, 4)]
GRID.insert(GRID.index(("b32t8", 32, 8, NO_CRASH)) + 1, ("b32t8_twin", 32, 8, NO_CRASH))


def _answer_holds_the_truth(answer: dict[str, Any], truth: dict[str, float]) -> None:
    """The winner is within 3 % of the true best, or the tie holds a configuration as fast as the best."""
    best = max(truth.values())
    if answer["winner"] is not None:
        assert truth[answer["winner"]] >= 0.97 * best, (answer["winner"], truth)
    else:
        assert answer["decision"] == "tied" and max(truth[n] for n in answer["tied"]) == best, (answer, truth)


def test_the_tune_names_the_true_best_at_each_load_for_half_the_grid_and_survives_a_crash(bench):
    """15 configurations, the best at c=1 (b64t8) not the best at c=4 (b32t8 and its exact twin), b64t1 dying
    under load: every answer holds the truth, the crash is infeasible with its diagnostics and the tune finishes,
    each configuration is started once plus the end's visits (the control and the contenders of open ties), and
    the tune measures at most half the requests of the full grid that `loadgen sweep` measures on the file."""
    names = [n for n, *_ in GRID]
    assert len(names) == 15
    res = bench.tune(bench.write(GRID))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((bench.out / "tune.json").read_text())
    assert doc["complete"] and doc["stopped"] is None

    # the answer, read as a CI job reads it
    feasible = {n: (b, t) for n, b, t, crash in GRID if crash == NO_CRASH}
    assert [(a["context"], a["concurrency"]) for a in doc["answers"]] == [(60, c) for c in LOADS]
    for answer, c in zip(doc["answers"], LOADS):
        _answer_holds_the_truth(answer, {n: true_tok_s(b, t, c) for n, (b, t) in feasible.items()})
        assert "b64t1" in [i["config"] for i in answer["ineligible"]]
        assert not set(answer) - set(VERDICT_FIELDS) - {"ranking", "contenders", "settled", "beyond_reach"}
    assert not {k for key in TUNE_FIELDS for k in key.split(", ")} ^ set(doc)

    # the crash: infeasible, said with the diagnostics' line, and the tune went on to every other configuration
    [crash] = doc["infeasible"]
    assert (crash["name"], crash["concurrency"]) == ("b64t1", 4)
    assert crash["sentence"].startswith("b64t1: the server died under load at c=4: loadgen-sim: fault: crashing")
    assert "b64t1: the server died under load at c=4" in " ".join(res.stdout.split())
    assert all(c["status"] == "measured" for c in doc["configs"] if c["name"] != "b64t1")

    # starts: one visit each, and an end visit only for the control and for contenders measured again there
    visits = {n: bench.doc(n)["sweep"]["attempts"] for n in names}
    assert bench.launches() == doc["restarts"] == sum(len(a) for a in visits.values())
    firsts = [v["config"] for v in doc["visits"] if v["phase"] == "first"]
    assert sorted(firsts) == sorted(names)
    for n in names:
        roles = {p["role"] for p in bench.doc(n)["tune"]["parts"]}
        assert len(visits[n]) == 1 or (len(visits[n]) == 2 and roles & {"again", "control"}), (n, roles)
    assert {p["role"] for p in bench.doc(firsts[0])["tune"]["parts"]} >= {"control"}  # the first visited

    # requests: counted from the records, against the grid's, which the sweep would measure
    measured = sum(1 for n in names for r in bench.records(n) if r.get("phase", "measure") == "measure")
    grid = len(names) * len(LOADS) * REQUESTS
    assert doc["grid"]["requests"] == grid and doc["grid"]["cells"] == len(names) * len(LOADS)
    assert measured == doc["requests_measured"] <= grid / 2, (measured, grid)
    assert doc["cells_measured"] == sum(len(bench.doc(n)["cells"]) for n in names)
    assert "cost:" in res.stdout and "the full grid at the same requests per cell" in res.stdout
    assert [line for line in (res.stdout + res.stderr).splitlines() if len(line) > 120] == []
    assert not set(bench.doc("b32t8")) - set(DOCUMENT_FIELDS)


SMALL = [("b8t4", 8, 4, NO_CRASH), ("b16t8", 16, 8, NO_CRASH), ("b32t8", 32, 8, NO_CRASH), ("b64t8", 64, 8, NO_CRASH)]


def _finished(bench: Bench, names: list[str]) -> dict[tuple[str, int, int], str]:
    """(configuration, concurrency, again) → the run id of every finished cell on disk."""
    out = {}
    for n in names:
        path = bench.out / f"{n}.json"
        cells = json.loads(path.read_text())["cells"] if path.exists() else []
        out |= {(n, c["concurrency"], c.get("again", 0)): c["run_id"] for c in cells
                if c["status"] == "ok" and "interrupted" not in [i["kind"] for i in c["incidents"]]}
    return out


@pytest.mark.untimed  # which cells are kept and measured, never how fast
def test_an_interrupted_tune_resumes_without_measuring_a_finished_cell_again_and_the_grid_is_the_sweeps(bench):
    """SIGINT once the second configuration has a finished part: exit 130; the same command goes on, keeps every
    finished cell (its run id unchanged), measures no request twice, and ends complete. Then `loadgen sweep` on the
    same file measures exactly the grid tune.json says it would have cost."""
    names = [n for n, *_ in SMALL]
    path = bench.write(SMALL, requests=32)
    proc = subprocess.Popen(bench.argv("tune", path, bench.out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=bench.tmp)
    second = names[3]  # visit_order(4) == [0, 3, 1, 2]: the last configuration is visited second
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not any(k[0] == second for k in _finished(bench, [second])):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    before = _finished(bench, names)
    assert {k[0] for k in before} >= {names[0], second}
    doc = json.loads((bench.out / "tune.json").read_text())
    assert not doc["complete"] and doc["visits"][-1]["status"] == "interrupted"

    again = bench.tune(path)
    assert again.returncode == 0, again.stderr[-3000:]
    after = _finished(bench, names)
    assert {k: after[k] for k in before} == before  # kept, not measured again
    ids = [r["request_id"] for n in names for r in bench.records(n)]
    assert len(ids) == len(set(ids))
    doc = json.loads((bench.out / "tune.json").read_text())
    assert doc["complete"] and doc["visits"][0]["config"] == names[0]
    assert [v["config"] for v in doc["visits"] if v["phase"] == "first" and v["status"] != "interrupted"] == \
        [names[i] for i in (0, 3, 1, 2)]

    swept = bench.tmp / "swept"
    sweep = subprocess.run(bench.argv("sweep", path, swept), check=False, capture_output=True, text=True,
                           timeout=120, cwd=bench.tmp)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    cells = [c for n in names for c in bench.doc(n, swept)["cells"]]
    requests = sum(1 for n in names for r in bench.records(n, swept) if r.get("phase", "measure") == "measure")
    assert (doc["grid"]["cells"], doc["grid"]["requests"]) == (len(cells), requests) == (8, 256)


EXAMPLE = ROOT / "docs" / "examples" / "sim_tune.toml"


def test_the_simulator_example_tune_runs_anywhere(tmp_path):
    """docs/examples/sim_tune.toml as shipped but for its port, with an empty PATH (`{python}` is the interpreter
    running the tune) and --out-dir elsewhere (the simulator's pidfile and log follow it: `{out_dir}`): it finishes
    (exit 0), names b64_t8_graphs infeasible where it died, answers both loads with the simulator's true best among
    the feasible configurations, and measures under half of the grid's requests."""
    port = free_port()
    (tmp_path / "tune.toml").write_text(EXAMPLE.read_text().replace("30124", str(port)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": str(tmp_path / "empty")}
    run = subprocess.run([sys.executable, "-m", "loadgen", "tune", "tune.toml", "--out-dir", "moved"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=150, env=env)
    out = tmp_path / "moved"
    try:
        assert run.returncode == 0, run.stderr[-3000:]
        assert (out / "sim.log").exists() and not (tmp_path / "results").exists()
        doc = json.loads((out / "tune.json").read_text())
        assert [(i["name"], i["concurrency"]) for i in doc["infeasible"]] == [("b64_t8_graphs", 4)]
        configs = {c["name"]: c["params"] for c in doc["configs"] if c["status"] == "measured"}
        for answer, c in zip(doc["answers"], (1, 4)):
            _answer_holds_the_truth(answer, {n: true_tok_s(p["budget"], p["topk"], c) for n, p in configs.items()})
        assert doc["requests_measured"] <= doc["grid"]["requests"] / 2
        assert "b64_t8_graphs: the server died under load at c=4" in " ".join(run.stdout.split())
    finally:
        try:
            os.kill(int((out / "sim.pid").read_text()), signal.SIGTERM)  # --exit-idle would stop it 30 s from now
        except (OSError, ValueError):
            pass
