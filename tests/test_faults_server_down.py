"""The server dying mid-cell, under each --on-server-down policy, with a real simulator that crashes (SIGKILL of
itself) and, for `wait`, a supervisor that starts it again on the same port, like systemd's Restart=always."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loadgen.record import CellKey, Record
from loadgen.run.server_down import ServerGuard, backoff_s
from tests.conftest import ROOT, run_loadgen
from tests.faults_util import assert_accounted, outputs, verdict, wait_truth

PLANNED = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Supervisor:
    """Runs the simulator on one port; when it dies, starts it again after `delay_s` with `later` flags."""

    def __init__(self, tmp_path: Path, first: list[str], later: list[str], delay_s: float):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.truth = tmp_path / "truth.jsonl"
        self.later = later
        self.delay_s = delay_s
        self.exits: list[int] = []
        self.stopped = False
        self.proc = self._spawn(first)
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _spawn(self, flags: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "sim", "--port", str(self.port), "--speed", "8",
                                 "--truth", str(self.truth), *flags], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert b"ready on" in proc.stdout.readline()
        return proc

    def _watch(self) -> None:
        while not self.stopped:
            code = self.proc.wait()
            if self.stopped:
                return
            self.exits.append(code)
            time.sleep(self.delay_s)
            self.proc = self._spawn(self.later)

    def stop(self) -> None:
        self.stopped = True
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def supervisor(tmp_path):
    made: list[Supervisor] = []

    def make(first: list[str], later: list[str], delay_s: float = 0.5) -> Supervisor:
        made.append(Supervisor(tmp_path, first, later, delay_s))
        return made[-1]

    yield make
    for s in made:
        s.stop()


# --crash-after counts generations: the readiness gate's 3 (--wait-ready) and the sizing probe come first
GATE = 3


def run(url: str, out: Path, *extra: str):
    return run_loadgen("--url", url, "--concurrency", "4,8", "--contexts", "60", "--max-tokens", "48",
                       "--requests-per-cell", str(PLANNED), "--out", str(out), "--server-metrics", "off", *extra,
                       timeout=90)


@pytest.mark.sim
def test_wait_remeasures_the_cell_when_the_server_is_back(supervisor, tmp_path):
    sup = supervisor(["--crash-after", str(9 + GATE)], [], delay_s=0.5)
    out = tmp_path / "r.json"
    proc = run(sup.url, out, "--on-server-down", "wait", "--server-wait-timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert sup.exits == [-9]
    assert "waiting up to 30 s for the server to come back (--on-server-down wait)" in proc.stderr
    assert "the server is back: ready after" in proc.stderr
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    assert (first["status"], first["attempt"], first["requests"]["ok"]) == ("ok", 1, PLANNED)
    [failed] = first["attempts"]
    assert failed["attempt"] == 0 and failed["status"] == "failed"
    assert failed["error"].startswith("the server went away: ")
    assert failed["recovery"]["ready"] is True
    assert second["status"] == "ok" and "attempts" not in second and second["requests"]["ok"] == PLANNED
    # every attempt's records are kept, told apart by `attempt` and by their request ids
    by_attempt = {a: [r for r in records if r["cell"]["concurrency"] == 4 and r["attempt"] == a] for a in (0, 1)}
    assert {r["outcome"] for r in by_attempt[0]} == {"ok", "connection_error"}
    assert len(by_attempt[0]) + failed["requests_not_sent"] == PLANNED
    assert [r["outcome"] for r in by_attempt[1]] == ["ok"] * PLANNED
    assert all(r["request_id"].endswith("-a1") for r in by_attempt[1])
    truth = wait_truth(sup, lambda rows: True)
    measured = {rid: row for rid, row in truth.items() if rid.startswith(doc["run_id"])}
    assert {r["request_id"] for r in records if r["outcome"] == "ok"} == set(measured)
    assert all(row["outcome"] == "ok" for row in measured.values())


@pytest.mark.sim
def test_wait_gives_up_when_the_server_stays_down(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--crash-after", str(9 + GATE))
    out = tmp_path / "r.json"
    t0 = time.monotonic()
    proc = run(sim.url, out, "--on-server-down", "wait", "--server-wait-timeout", "1.5")
    assert time.monotonic() - t0 < 20
    assert proc.returncode == 1
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    assert first["status"] == "failed" and "attempts" not in first
    assert first["error"].startswith("the server went away: ")
    assert "; it did not come back: not ready after 1.5 s; last state: connection refused: nothing listens on " in first["error"]
    why = "not measured: the server went away and did not come back within --server-wait-timeout 1.5 s"
    assert verdict(second) == (60, 8, "skipped", why, [{"kind": "not_reached", "reason": why}])


@pytest.mark.sim
def test_stop_writes_results_and_skips_the_rest(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--crash-after", str(9 + GATE))
    out = tmp_path / "r.json"
    proc = run(sim.url, out)  # stop is the default
    assert proc.returncode == 1
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    assert first["status"] == "failed" and first["error"].startswith("the server went away: ")
    assert "consecutive connection errors, then a new connection to " + sim.url + " failed" in first["error"]
    why = "not measured: the server went away during ctx=60 c=4 (--on-server-down stop)"
    assert verdict(second) == (60, 8, "skipped", why, [{"kind": "not_reached", "reason": why}])
    assert {r["cell"]["concurrency"] for r in records} == {4}


@pytest.mark.sim
def test_skip_goes_on_to_the_next_cell(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--crash-after", str(9 + GATE))
    out = tmp_path / "r.json"
    proc = run(sim.url, out, "--on-server-down", "skip")
    assert proc.returncode == 1
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    assert first["status"] == "failed" and first["error"].startswith("the server went away: ")
    # the next cell was tried: preparing its prompts needs the server's tokenizer, which is gone
    assert second["status"] == "failed"
    assert second["error"].startswith("the server went away: unreachable while preparing the cell (")
    assert second["requests"] == {"ok": 0, "failed": 0, "cancelled": 0, "by_outcome": {}}
    assert second["requests_not_sent"] == PLANNED
    assert "ctx=60 c=4: failed; going on to the next cell (--on-server-down skip)" in proc.stderr


@pytest.mark.sim
def test_connection_errors_are_bounded_not_spun(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8", "--crash-after", str(3 + GATE))
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "4", "--contexts", "60", "--max-tokens", "48",
                       "--requests-per-cell", "400", "--out", str(out), "--server-metrics", "off",
                       "--server-down-after", "8", timeout=60)
    assert proc.returncode == 1
    doc, records = outputs(out)
    assert_accounted(doc, records, 400)
    refused = [r for r in records if r["outcome"] == "connection_error"]
    # 4 in flight died with the server, then each slot backs off: the check after 8 errors ends the cell
    assert 8 <= len(refused) <= 8 + 4
    assert doc["cells"][0]["requests_not_sent"] >= 400 - 2 - 12


@pytest.mark.unit
def test_backoff_schedule():
    assert [backoff_s(k) for k in range(9)] == [0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert backoff_s(10_000) == 2.0


@pytest.mark.unit
def test_pause_backs_off_and_wakes_when_the_server_is_declared_down():
    async def scenario():
        guard = ServerGuard("http://127.0.0.1:1", threshold=100)
        rec = Record(run_id="r", cell=CellKey(60, 1), seq=0, outcome="connection_error", error="refused")
        for _ in range(3):
            guard.record(rec)
        t0 = time.monotonic()
        await guard.pause(rec)
        slept = time.monotonic() - t0
        # the backoff of 3 failures (0.2 s), not that of 2 (0.1 s) or 4 (0.4 s): a busy machine may wake a
        # timer late by milliseconds, never early
        assert backoff_s(2) < backoff_s(3) - 0.01 <= slept < backoff_s(4)
        guard.record(rec)  # 4 consecutive: 0.4 s, cut short when the server is declared down
        loop = asyncio.get_running_loop()
        marked: list[float] = []
        loop.call_later(0.05, lambda: (marked.append(time.monotonic()), guard.mark_down("gone")))
        t0 = time.monotonic()
        await guard.pause(rec)
        # woken by the declaration, before its own 0.4 s would have ended it, however late both ran
        assert t0 < marked[0] <= time.monotonic() < t0 + backoff_s(4)
        ok = Record(run_id="r", cell=CellKey(60, 1), seq=1, outcome="ok")
        guard.arm()
        guard.record(ok)
        assert guard.consecutive == 0 and guard.down is None

    asyncio.run(scenario())
