"""Sweeps end to end: `loadgen sweep` as a real process, the simulator restarted per configuration by a real
reconfigure script (tests/fixtures/sim_reconfigure.py) on a fixed loopback port. Truth logs of each simulator
process prove which server served every measured request."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.schema_check import assert_documented

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = str(ROOT / "tests" / "fixtures" / "sim_reconfigure.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bench:
    """A temp folder with a sweep file, the reconfigure script's state, and the simulators it started."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.port = free_port()
        self.state = tmp / "state"
        self.out = tmp / "out"

    def write(self, configs: str, *, sim_args: str = '"--speed", "20"', reconf_opts: str = "",
              expect: bool = True, concurrency: str = "[1, 4]", max_tokens: int = 32) -> Path:
        text = f"""
name = "t"
reconfigure = ["{sys.executable}", "{FIXTURE}", "{self.state}", "{self.port}", {reconf_opts}
               "--", "--budget", "{{budget}}", "--topk", "{{topk}}", {sim_args}]
diagnostics = ["{sys.executable}", "{FIXTURE}", "{self.state}", "{self.port}", "--diagnose"]

[server]
url = "http://127.0.0.1:{self.port}"

[readiness]
timeout_s = 20
poll_s = 0.05
successes = 2
{'[expect]' if expect else ''}
{'speculative_ddtree_budget = "{budget}"' if expect else ''}

[matrix]
contexts = [60]
max_tokens = {max_tokens}
requests_per_cell = 8
concurrency = {concurrency}

{configs}
"""
        path = self.tmp / "sweep.toml"
        path.write_text(text)
        return path

    def sweep(self, path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "loadgen", "sweep", str(path), "--out-dir", str(self.out), *args]
        return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout,
                              cwd=self.tmp)

    def doc(self, name: str) -> dict:
        return json.loads((self.out / f"{name}.json").read_text())

    def records(self, name: str) -> list[dict]:
        path = self.out / f"{name}.requests.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def summary(self) -> dict:
        return json.loads((self.out / "sweep.json").read_text())

    def truth(self) -> dict[str, dict]:
        """Every simulator process's truth rows by request id (rows carry the budget of their process)."""
        rows = {}
        for f in sorted(self.state.glob("truth-*.jsonl")):
            for line in f.read_text().splitlines():
                row = json.loads(line)
                row["file"] = f.name
                rows[row["rid"]] = row
        return rows

    def reconfigurations(self) -> int:
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
    time.sleep(0.05)  # a delayed restart may still be launching
    b.stop()


GRID = """
[grid]
budget = [8, 16, 32]
topk = [4]
"""


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_three_configurations_measured_on_the_right_servers(bench):
    res = bench.sweep(bench.write(GRID))
    assert res.returncode == 0, res.stderr[-3000:]
    names = ["budget8_topk4", "budget16_topk4", "budget32_topk4"]
    summary = bench.summary()
    assert [(c["name"], c["status"], c["cells_ok"], c["cells_total"]) for c in summary["configs"]] == \
        [(n, "ok", 2, 2) for n in names]
    truth = bench.truth()
    accept = []
    for name, budget in zip(names, (8, 16, 32)):
        doc = bench.doc(name)
        assert_documented(doc)
        assert doc["target"]["server_info"]["speculative_ddtree_budget"] == budget
        assert doc["sweep"]["params"] == {"budget": budget, "topk": 4}
        assert [(c["concurrency"], c["status"], c["requests"]["ok"]) for c in doc["cells"]] == \
            [(1, "ok", 8), (4, "ok", 8)]
        ready = doc["sweep"]["attempts"][-1]["readiness"]
        assert ready["ready"] and ready["expect_ok"] and ready["generations_ok"] == 2
        recs = bench.records(name)
        assert len(recs) == 16 and all(r["outcome"] == "ok" for r in recs)
        # every measured request was served by a simulator process running this configuration's budget
        assert {truth[r["request_id"]]["budget"] for r in recs} == {budget}
        assert {r["run_id"] for r in recs} == {c["run_id"] for c in doc["cells"]} == {doc["run_id"]}
        accept.append(doc["cells"][0]["accept_length"]["value"])
    assert accept[0] < accept[1] < accept[2]
    # the sweep's closing table: one row per configuration per cell, values from the results
    table = res.stdout[res.stdout.index(" ctx  conc configuration"):res.stdout.index("The answer")]
    assert sum(line.strip().startswith(("60", "budget")) for line in table.splitlines()) == 6
    b16 = bench.doc("budget16_topk4")["cells"][1]["output_tok_s"]
    assert f"{b16:.1f}" in table

    csv_out = subprocess.run([sys.executable, "-m", "loadgen", "compare", str(bench.out), "--baseline",
                              "budget16_topk4", "--format", "csv"], check=False, capture_output=True,
                             text=True, timeout=30)
    assert csv_out.returncode == 0, csv_out.stderr
    lines = csv_out.stdout.strip().splitlines()
    assert len(lines) == 1 + 6
    row = dict(zip(lines[0].split(","), lines[4].split(",")))  # ctx 60, c=4, first configuration
    assert row["config"] == "budget8_topk4" and row["concurrency"] == "4"
    c8 = bench.doc("budget8_topk4")["cells"][1]
    c16 = bench.doc("budget16_topk4")["cells"][1]
    assert float(row["out_tok_s"]) == pytest.approx(c8["output_tok_s"])
    assert float(row["out_tok_s_x"]) == pytest.approx(c8["output_tok_s"] / c16["output_tok_s"])

    plots = bench.tmp / "plots"
    rep = subprocess.run([sys.executable, "-m", "loadgen", "report", str(bench.out), "--plots", str(plots)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    for name in ("output_tok_s.png", "request_tok_s.png", "accept_length.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (plots / "power.png").exists()
    assert "power.png not written: no cell has power data" in rep.stdout


RACE = """
[[configs]]
name = "b16"
budget = 16
topk = 4
delay = 0
stale = 0

[[configs]]
name = "b32"
budget = 32
topk = 4
delay = 0.3
stale = 1.5
"""


# timed: the readiness gate's first probe must come within the 0.3 s the old server still answers, which a
# busy machine can miss; so it runs in the session, alone
def test_stale_old_process_is_not_measured(bench):
    """b32's reconfigure returns at once; the old b16 server answers for 0.3 s more, then lingers 1.5 s as a
    stale process (health 200, generation failing) before the b32 server starts. No [expect], the hardest
    case: only seeing the server go away, health and real generations protect the measurement."""
    path = bench.write(RACE, reconf_opts='"--delay", "{delay}", "--stale", "{stale}",', expect=False)
    t0 = time.monotonic()
    res = bench.sweep(path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = bench.doc("b32")
    assert doc["target"]["server_info"]["speculative_ddtree_budget"] == 32
    ready = doc["sweep"]["attempts"][-1]["readiness"]
    states = [s["state"] for s in ready["states"]]
    assert states[0] == "up, but not yet seen restarting (and no expect map)"
    assert ready["saw_down"] and ready["elapsed_s"] >= 1.8
    assert any(s.startswith("/health_generate answered 503") for s in states), states
    logs = sorted(bench.state.glob("sim-*.log"))
    assert [("budget=16" in f.read_text(), "budget=32" in f.read_text()) for f in logs] == \
        [(True, False), (True, False), (False, True)]  # b16, the stale b16, b32
    truth = bench.truth()
    recs = bench.records("b32")
    assert len(recs) == 16
    newest = max(bench.state.glob("truth-*"), key=lambda p: int(p.stem.split("-")[1])).name
    for r in recs:
        row = truth[r["request_id"]]
        assert (row["budget"], row["outcome"], row["file"]) == (32, "ok", newest)
    assert time.monotonic() - t0 < 30


FAILURES = """
[[configs]]
name = "crash_at_start"
budget = "notanumber"
topk = 4
crash_after = 0
exit = 0
timeout_s = 2.5

[[configs]]
name = "refused"
budget = 8
topk = 4
crash_after = 0
exit = 3

[[configs]]
name = "midcrash"
budget = 8
topk = 4
crash_after = 12
exit = 0

[[configs]]
name = "good"
budget = 16
topk = 4
crash_after = 0
exit = 0
"""


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_failed_configurations_are_recorded_and_the_sweep_goes_on(bench):
    path = bench.write(FAILURES, reconf_opts='"--exit", "{exit}",',
                       sim_args='"--speed", "20", "--crash-after", "{crash_after}"')
    res = bench.sweep(path)
    assert res.returncode == 1, res.stderr[-3000:]
    status = {c["name"]: (c["status"], c["cells_ok"]) for c in bench.summary()["configs"]}
    assert status == {"crash_at_start": ("failed", 0), "refused": ("failed", 0), "midcrash": ("partial", 1),
                      "good": ("ok", 2)}

    crash = bench.doc("crash_at_start")["sweep"]["attempts"][-1]
    assert crash["reason"].startswith("not ready after 2.5 s; last state: connection refused: nothing listens on")
    assert "invalid int value: 'notanumber'" in crash["diagnostics"]["output_tail"]
    assert "invalid int value" in (bench.out / "crash_at_start.diagnostics.txt").read_text()

    refused = bench.doc("refused")["sweep"]["attempts"][-1]
    assert refused["reason"].startswith("reconfigure failed:") and "exited with status 3" in refused["reason"]
    assert refused["reconfigure"]["rc"] == 3 and refused["reconfigure"]["elapsed_s"] < 5
    assert "reconfigure: refusing" in (bench.out / "refused.reconfigure.log").read_text()

    mid = bench.doc("midcrash")
    c1, c4 = mid["cells"]
    assert (c1["status"], c1["requests"]["ok"]) == ("ok", 8)
    assert c4["status"] == "failed" and "server went away" in c4["error"]
    assert c4["requests"]["failed"] >= 1
    attempt = mid["sweep"]["attempts"][-1]
    assert attempt["outcome"] == "partial"
    assert "crashing: generation request 13" in attempt["diagnostics"]["output_tail"]

    good = bench.doc("good")
    assert [c["status"] for c in good["cells"]] == ["ok", "ok"]
    assert good["target"]["server_info"]["speculative_ddtree_budget"] == 16
    closing = res.stdout.split("sweep t (")[1]
    assert "midcrash             partial  1/2 cells" in closing
    assert "good                 ok       2/2 cells" in closing


RESUME = """
[grid]
budget = [8, 16]
topk = [4]
"""


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_resume_after_sigkill_keeps_finished_cells(bench):
    path = bench.write(RESUME, sim_args='"--speed", "4"', concurrency="[1, 2, 4]", max_tokens=64)
    results = bench.out / "budget8_topk4.json"
    argv = [sys.executable, "-m", "loadgen", "sweep", str(path), "--out-dir", str(bench.out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=bench.tmp)
    deadline = time.monotonic() + 40
    done: list[dict] = []
    while time.monotonic() < deadline and not done and proc.poll() is None:
        time.sleep(0.01)
        try:
            done = [c for c in json.loads(results.read_text())["cells"] if c["status"] == "ok"]
        except (OSError, ValueError, KeyError):
            pass
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert 1 <= len(done) < 3, f"killed too late to test resuming: {len(done)} cells finished"
    kept = json.loads(results.read_text())["cells"]  # the file is whole: it is replaced atomically
    kept = [c for c in kept if c["status"] == "ok"]
    json.loads((bench.out / "sweep.json").read_text())

    res = bench.sweep(path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"[budget8_topk4] resuming: {len(kept)} of 3 cells already measured" in res.stderr
    doc = bench.doc("budget8_topk4")
    assert [c["concurrency"] for c in doc["cells"]] == [1, 2, 4]
    assert all(c["status"] == "ok" for c in doc["cells"])
    for old in kept:  # finished cells were not measured again
        new = next(c for c in doc["cells"] if c["concurrency"] == old["concurrency"])
        assert (new["run_id"], new["output_tok_s"]) == (old["run_id"], old["output_tok_s"])
    recs = bench.records("budget8_topk4")
    for cell in doc["cells"]:  # records match results: the killed cell's records are gone, none twice
        mine = [r for r in recs if r["cell"]["concurrency"] == cell["concurrency"]]
        assert len(mine) == 8 and {r["run_id"] for r in mine} == {cell["run_id"]}
    assert len(recs) == 24
    assert len({r["request_id"] for r in recs}) == 24

    before = bench.reconfigurations()
    again = bench.sweep(path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[budget8_topk4] all 3 cells already measured: skipped" in again.stderr
    assert "[budget16_topk4] all 3 cells already measured: skipped" in again.stderr
    assert bench.reconfigurations() == before  # nothing was restarted

    old_ids = {c["run_id"] for c in bench.doc("budget16_topk4")["cells"]}
    forced = bench.sweep(path, "--force", "--only", "budget16_topk4")
    assert forced.returncode == 0, forced.stderr[-3000:]
    new = bench.doc("budget16_topk4")
    assert len({c["run_id"] for c in new["cells"]}) == 1 and not {c["run_id"] for c in new["cells"]} & old_ids
    assert len(bench.records("budget16_topk4")) == 24
    assert bench.doc("budget8_topk4")["cells"] == doc["cells"]  # --only left the other one alone


def _popen_sweep(bench: Bench, path: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "loadgen", "sweep", str(path), "--out-dir", str(bench.out)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=bench.tmp)


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_interrupt_while_waiting_stops_the_sweep(bench):
    path = bench.write(FAILURES.replace("timeout_s = 2.5", "timeout_s = 30"), reconf_opts='"--exit", "{exit}",',
                       sim_args='"--speed", "20", "--crash-after", "{crash_after}"')
    proc = _popen_sweep(bench, path)
    seen = []  # crash_at_start's server never comes up: interrupt once the gate says it is waiting
    for line in proc.stderr:
        seen.append(line)
        if "] waiting " in line:
            break
    deadline = time.monotonic() + 20
    while bench.reconfigurations() < 1 and time.monotonic() < deadline:  # its command has started the server
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=20)
    err = "".join(seen) + rest
    assert proc.returncode == 130, err[-2000:]
    assert time.monotonic() - t0 < 10
    assert "SIGINT: stopping the sweep" in err and "Traceback" not in err
    assert bench.reconfigurations() == 1  # no other configuration was started
    assert [c["status"] for c in bench.summary()["configs"]] == ["pending"] * 4


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_interrupt_while_measuring_keeps_the_cells_and_stops(bench):
    path = bench.write(RESUME, sim_args='"--speed", "4"', concurrency="[1, 2, 4]", max_tokens=64)
    proc = _popen_sweep(bench, path)
    results = bench.out / "budget8_topk4.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if any(c["status"] == "ok" for c in json.loads(results.read_text())["cells"]):
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-2000:]
    assert bench.reconfigurations() == 1
    doc = bench.doc("budget8_topk4")
    # kept on resume: ok, and not stopped early by the interrupt (the rule plain runs share)
    done = [c for c in doc["cells"] if c["status"] == "ok" and "interrupted" not in
            [i["kind"] for i in c["incidents"]]]
    assert 1 <= len(done) < 3
    assert doc["sweep"]["attempts"][-1]["reason"] == "interrupted by SIGINT"
    assert doc["sweep"]["attempts"][-1]["interrupted_by"] == "SIGINT"
    status = {c["name"]: c["status"] for c in bench.summary()["configs"]}
    assert status == {"budget8_topk4": "partial", "budget16_topk4": "pending"}
    cut = [c for c in doc["cells"] if c["status"] == "ok" and "interrupted" in [i["kind"] for i in c["incidents"]]]
    first = bench.summary()["configs"][0]  # a cut-short cell is no ok cell of the summary: it is measured again
    assert first["cells_ok"] == len(done) and len(first["cells_cut_short"]) == len(cut)
    again = bench.sweep(path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"[budget8_topk4] resuming: {len(done)} of 3 cells already measured" in again.stderr


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_resume_keeps_open_loop_rate_cells(bench):
    """Rate cells share concurrency 0: they are told apart by their rate, so a resumed sweep measures only
    the rate cell that did not finish and keeps the other one, its records included."""
    path = bench.write('[[configs]]\nbudget = 8\ntopk = 4\n', concurrency="[1]")
    text = path.read_text().replace("concurrency = [1]", 'concurrency = [1]\nargs = ["--request-rate", "20,40"]')
    path.write_text(text)
    first = bench.sweep(path)
    assert first.returncode == 0, first.stderr[-3000:]
    results = bench.out / "budget8_topk4.json"
    doc = json.loads(results.read_text())
    assert [(c["request_rate"], c["status"]) for c in doc["cells"]] == [(20.0, "ok"), (40.0, "ok")]
    kept, redo = doc["cells"]
    redo.update(status="failed", error="made to fail by the test")  # as if the cell had failed
    results.write_text(json.dumps(doc))

    again = bench.sweep(path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[budget8_topk4] resuming: 1 of 2 cells already measured" in again.stderr
    cells = bench.doc("budget8_topk4")["cells"]
    assert [c["request_rate"] for c in cells] == [20.0, 40.0] and all(c["status"] == "ok" for c in cells)
    assert (cells[0]["run_id"], cells[0]["output_tok_s"]) == (kept["run_id"], kept["output_tok_s"])
    assert cells[1]["run_id"] != redo["run_id"]
    recs = bench.records("budget8_topk4")
    by_rate = {rate: {r["run_id"] for r in recs if r["cell"].get("request_rate") == rate} for rate in (20.0, 40.0)}
    assert by_rate == {20.0: {kept["run_id"]}, 40.0: {cells[1]["run_id"]}}


SIM_EXAMPLE = ROOT / "docs" / "examples" / "sim_budget_sweep.toml"


@pytest.mark.untimed  # which server was measured and what the files keep, never how fast
def test_the_simulator_example_sweep_runs_anywhere(tmp_path):
    """docs/examples/sim_budget_sweep.toml as shipped but for its port, with an empty PATH (no `python3` to
    find: `{python}` is the interpreter running the sweep) and a nested --out-dir whose folders do not exist:
    two configurations measured (exit 0), each by a simulator of its own budget (the first one stopped through
    the pidfile when the second started); the pidfile and the log are in --out-dir (`{out_dir}`), not in the
    file's own results/sim-budget. Every line it printed fits 120 columns, its status lines said whole."""
    port = free_port()
    text = SIM_EXAMPLE.read_text().replace("30123", str(port))
    (tmp_path / "sweep.toml").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": str(tmp_path / "empty")}
    run = subprocess.run([sys.executable, "-m", "loadgen", "sweep", "sweep.toml", "--out-dir", "runs/nested/budget"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    out = tmp_path / "runs" / "nested" / "budget"
    pid = int((out / "sim.pid").read_text())
    try:
        assert run.returncode == 0, run.stderr[-3000:]
        assert not (tmp_path / "results").exists()  # nothing at the file's own out_dir
        summary = json.loads((out / "sweep.json").read_text())
        assert [(c["name"], c["status"]) for c in summary["configs"]] == [("b8_t4", "ok"), ("b16_t8", "ok")]
        for name, budget in (("b8_t4", 8), ("b16_t8", 16)):
            doc = json.loads((out / f"{name}.json").read_text())
            assert doc["target"]["server_info"]["speculative_ddtree_budget"] == budget
            assert [c["status"] for c in doc["cells"]] == ["ok", "ok"]
        log = (out / "sim.log").read_text()
        assert log.count("loadgen-sim ready on") == 2 and "budget=16 topk=8" in log.splitlines()[-1]
        assert [line for line in (run.stdout + run.stderr).splitlines() if len(line) > 120] == []
        # the reconfigure command's last line is said whole (it was cut mid-word: "(budget=16 topk=)")
        assert not re.search(r"topk=\)", " ".join(run.stderr.split())), run.stderr
    finally:
        os.kill(pid, signal.SIGTERM)  # --exit-idle would stop it 30 s from now
