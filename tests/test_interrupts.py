"""Ctrl-C, SIGTERM and SIGKILL on a real `loadgen` process in the middle of a cell.

First signal: no new request, the ones in flight finish (drain), exit 130 (SIGINT) or 143 (SIGTERM).
Second signal, or the end of --drain-timeout: the ones in flight are cancelled, each recorded as cancelled.
SIGKILL: the records of ended requests are on disk, the results JSON is the last one written, whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from loadgen.files import read_json
from tests.conftest import ROOT
from tests.faults_util import assert_accounted, jsonl_lines, outputs, records_path, verdict, wait_truth

pytestmark = pytest.mark.sim

PLANNED = 8


def load(max_tokens: int) -> tuple[str, ...]:
    return ("--concurrency", "4,8", "--contexts", "60", "--max-tokens", str(max_tokens), "--requests-per-cell",
            str(PLANNED), "--server-metrics", "off")


# ~0.7 s per request at --speed 8: signals land while the first wave of 4 is streaming, and a drain ends soon
LONG = load(1500)
# The cancelling tests never wait for a stream to end: ~3 s streams keep the cancellation mid-stream however
# late a busy machine lets the test send its signals (with LONG, a 0.3 s drain ended ~0.1 s before the streams).
LONGER = load(6000)


class Loadgen:
    def __init__(self, tmp_path: Path, *args: str):
        self.out = tmp_path / "r.json"
        self.stderr_path = tmp_path / "stderr.txt"
        with open(self.stderr_path, "wb") as err:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "loadgen", *args, "--out", str(self.out)],
                                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

    def wait_streaming(self, timeout_s: float = 20) -> None:
        """Until the first cell's requests are streaming: the results file is written right before it."""
        deadline = time.monotonic() + timeout_s
        while not self.out.exists():
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_logged(self, text: str, timeout_s: float = 20) -> None:
        """Until `text` is in the process's stderr (e.g. it has handled a signal)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.stderr():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.stderr()
            time.sleep(0.005)

    def records_on_disk(self) -> list[dict]:
        """The records whose lines are whole so far: a read while the run writes may end inside a line (the file
        grows a page at a time during one write)."""
        path = records_path(self.out)
        if not os.path.exists(path):
            return []
        with open(path, "rb") as fh:
            whole = fh.read().rpartition(b"\n")[0]
        return [orjson.loads(line) for line in whole.splitlines()]

    def wait(self, timeout_s: float = 30) -> int:
        return self.proc.wait(timeout_s)

    def stderr(self) -> str:
        return self.stderr_path.read_text()


@pytest.fixture
def loadgen(tmp_path):
    made: list[Loadgen] = []

    def start(*args: str) -> Loadgen:
        made.append(Loadgen(tmp_path, *args))
        return made[-1]

    yield start
    for lg in made:
        if lg.proc.poll() is None:
            lg.proc.kill()
            lg.proc.wait()


def check_drained(lg: Loadgen, sim, name: str) -> list[dict]:
    doc, records = outputs(lg.out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    # the first wave finished: nothing cancelled, nothing lost, the rest never sent
    assert [r["outcome"] for r in records] == ["ok"] * 4
    assert first["status"] == "ok" and first["requests_not_sent"] == PLANNED - 4
    assert first["warnings"] == [f"stopped early (interrupted by {name}): 4 of 8 measured requests not sent"]
    why = f"not measured: interrupted by {name}"
    assert verdict(second) == (60, 8, "skipped", why, [{"kind": "interrupted_before", "reason": why}])
    assert first["incidents"] == [{"kind": "interrupted", "reason": first["warnings"][0]}]
    truth = wait_truth(sim, lambda rows: len(rows) >= 5)
    for rec in records:
        row = truth[rec["request_id"]]
        assert row["outcome"] == "ok" and rec["completion_tokens"] == row["completion_tokens"] == 1500
    err = lg.stderr()
    assert f"{name}: no new requests; 4 in flight may finish within 30 s (--drain-timeout); {name} again " \
           "cancels them" in err
    assert f"interrupted by {name}; results: {lg.out}" in err
    return records


@pytest.mark.untimed  # outcomes and files; its requests last seconds, far longer than any busy machine's delay
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_first_signal_drains_in_flight_requests(sig, code, loadgen, sim_factory):
    sim = sim_factory("--speed", "8")
    lg = loadgen("--url", sim.url, *LONG)
    lg.wait_streaming()
    lg.signal(sig)
    assert lg.wait() == code
    check_drained(lg, sim, sig.name)


def all_cancelled(lg) -> tuple[dict, list[dict]]:
    """The run exited 130 and each of the 4 requests in flight is accounted for as cancelled."""
    assert lg.wait() == 130
    doc, records = outputs(lg.out)
    assert_accounted(doc, records, PLANNED)
    assert [r["outcome"] for r in records] == ["cancelled"] * 4
    return doc, records


def test_second_sigint_cancels_in_flight_requests(loadgen, sim_factory):
    sim = sim_factory("--speed", "8")
    lg = loadgen("--url", sim.url, *LONGER)
    lg.wait_streaming()
    lg.signal(signal.SIGINT)
    # a second SIGINT sent before the first was handled would merge with it (signals are not queued)
    lg.wait_logged("SIGINT: no new requests")
    time.sleep(0.2)
    t_cancel_ns = time.monotonic_ns()
    lg.signal(signal.SIGINT)
    doc, records = all_cancelled(lg)
    for rec in records:
        assert rec["error"] == "cancelled before the response ended"
        assert 0 < (rec["t_end_ns"] - t_cancel_ns) / 1e9 < 0.5
        assert rec["chunks"] > 0  # they were streaming
    first, second = doc["cells"]
    assert first["requests"]["by_outcome"] == {"cancelled": 4} and first["status"] == "failed"
    assert second["status"] == "skipped"
    assert "SIGINT again: cancelling the requests in flight" in lg.stderr()
    # the simulator saw each cancelled request hang up
    truth = wait_truth(sim, lambda rows: len(rows) >= 5)
    assert {truth[r["request_id"]]["outcome"] for r in records} == {"client_disconnected"}


def test_drain_timeout_cancels_what_is_left(loadgen, sim_factory):
    sim = sim_factory("--speed", "8")
    lg = loadgen("--url", sim.url, *LONGER, "--drain-timeout", "0.3")
    lg.wait_streaming()
    t_signal_ns = time.monotonic_ns()
    lg.signal(signal.SIGINT)
    _, records = all_cancelled(lg)
    for rec in records:
        assert (rec["t_end_ns"] - t_signal_ns) / 1e9 == pytest.approx(0.3, abs=0.15)


def test_interrupt_while_waiting_for_the_server(loadgen, sim_factory):
    sim = sim_factory("--speed", "8", "--crash-after", "6")  # after the readiness gate's 3, the probe and 2 more
    lg = loadgen("--url", sim.url, *LONG, "--on-server-down", "wait", "--server-wait-timeout", "60")
    deadline = time.monotonic() + 20
    while "waiting up to 60 s for the server to come back" not in lg.stderr():
        assert time.monotonic() < deadline and lg.proc.poll() is None, lg.stderr()
        time.sleep(0.05)
    t0 = time.monotonic()
    lg.signal(signal.SIGINT)
    assert lg.wait() == 130
    assert time.monotonic() - t0 < 2
    doc, records = outputs(lg.out)
    assert_accounted(doc, records, PLANNED)
    first, second = doc["cells"]
    assert first["status"] == "failed" and first["error"].startswith("the server went away: ")
    assert second["error"] == "not measured: interrupted by SIGINT"


@pytest.mark.untimed  # outcomes and files; its requests last seconds, far longer than any busy machine's delay
def test_ctrl_c_at_the_terminal_leaves_the_builtin_simulator_running_for_the_drain(loadgen):
    # no --url: loadgen starts its own simulator; a terminal's Ctrl-C goes to the whole process group
    lg = loadgen(*LONG, "--sim-speed", "8")
    lg.wait_streaming()
    os.killpg(lg.proc.pid, signal.SIGINT)
    assert lg.wait() == 130
    doc, records = outputs(lg.out)
    assert_accounted(doc, records, PLANNED)
    assert [r["outcome"] for r in records] == ["ok"] * 4


def child_pids(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


@pytest.mark.untimed  # outcomes and files; its requests last seconds, far longer than any busy machine's delay
def test_sigkill_loses_at_most_the_requests_in_flight(loadgen):
    lg = loadgen(*LONG, "--sim-speed", "8", "--requests-per-cell", "12")
    lg.wait_streaming()
    deadline = time.monotonic() + 30
    while len(first := lg.records_on_disk()) < 4:  # the first wave has ended ...
        assert lg.proc.poll() is None and time.monotonic() < deadline, lg.stderr()
        time.sleep(0.01)
    # ... and the second, sent as it ended, is a third of the way through the time a wave takes
    time.sleep(min(r["t_end_ns"] - r["t_sent_ns"] for r in first) / 3e9)
    sims = child_pids(lg.proc.pid)
    assert len(sims) == 1
    lg.proc.kill()
    assert lg.wait() == -9
    doc = read_json(str(lg.out))  # whole: replaced atomically, never written in place
    assert doc["schema"] == "loadgen.results/v1" and doc["cells"] == []
    lines = jsonl_lines(lg.out)
    records = [orjson.loads(line) for line in lines]  # every line whole: each was written and flushed at once
    assert len(records) >= 4 and {r["outcome"] for r in records} == {"ok"}
    assert len({r["request_id"] for r in records}) == len(records)
    # the built-in simulator does not outlive loadgen
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{sims[0]}") and _alive(sims[0]):
        assert time.monotonic() < deadline, "the simulator outlived a SIGKILLed loadgen"
        time.sleep(0.05)
    assert os.path.getsize(records_path(lg.out)) == sum(len(line) + 1 for line in lines)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
