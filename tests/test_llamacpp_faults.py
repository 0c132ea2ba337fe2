"""A real llama-server that stalls (SIGSTOP for 10 s) or is killed mid-cell: every request is accounted for,
one record each, and each record agrees with what the server did (its log's tasks and the stop/kill instant,
taken on the same CLOCK_MONOTONIC as loadgen's stamps). See test_llamacpp.py for how the server is built."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.faults_util import assert_accounted, outputs, records_path
from tests.llamacpp.server import LlamaServer, spec_args, start_server, tasks
from tests.llamacpp.tiny_model import FAST_VOCAB, tiny_model
from tests.test_llamacpp import require_binary

pytestmark = pytest.mark.engine

MAX_TOKENS = 160  # ~1 s a stream on this machine: a signal sent when a first record lands finds one mid-stream
PER_CELL = 6
STALL_S = 10.0
IDLE_TIMEOUT_S = 3.0


@pytest.fixture
def server(tmp_path) -> LlamaServer:
    require_binary()
    model = tiny_model(FAST_VOCAB)  # no prompt is sized against the server's count here: the quick-loading one
    srv = start_server(tmp_path, spec_args(model, model, n_max=4))
    yield srv
    if srv.proc.poll() is None:
        os.kill(srv.proc.pid, signal.SIGCONT)  # a failed stall test must not leave it stopped
    srv.stop()


def start_loadgen(server: LlamaServer, out: Path, *args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "loadgen", "--url", server.url, "--max-tokens", str(MAX_TOKENS), "--concurrency",
            "2", "--requests-per-cell", str(PER_CELL), "--idle-timeout", str(IDLE_TIMEOUT_S), "--out", str(out), *args]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_first_record(out: Path, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Return once the run's first measured request has ended (its line is on disk)."""
    path = Path(records_path(out))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= 1:
            return
        if proc.poll() is not None:
            pytest.fail(f"loadgen ended before its first record: {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)
    pytest.fail("no record within 60 s")


def full_streams(server: LlamaServer) -> int:
    return sum(1 for t in tasks(server.log()).values() if t.generated == MAX_TOKENS)


def test_a_stalled_server_is_accounted_request_by_request(server, tmp_path):
    out = tmp_path / "stall.json"
    proc = start_loadgen(server, out, "--contexts", "60")
    wait_first_record(out, proc)
    t_stop = time.monotonic_ns()
    os.kill(server.proc.pid, signal.SIGSTOP)
    time.sleep(STALL_S)
    os.kill(server.proc.pid, signal.SIGCONT)
    t_cont = time.monotonic_ns()
    stdout, stderr = proc.communicate(timeout=120)
    doc, records = outputs(out)
    assert_accounted(doc, records, PER_CELL)
    assert len(records) == PER_CELL, stderr[-2000:]  # a stalled server is not a gone one: the cell goes on
    by = Counter(r["outcome"] for r in records)
    assert set(by) <= {"ok", "timeout"} and by["timeout"] >= 1, (by, stderr[-2000:])
    for r in records:
        if r["outcome"] == "ok":
            # no stream can be ok across the stall: it would have gone IDLE_TIMEOUT_S without a byte. One may end
            # a little after t_stop on bytes the server wrote before it stopped (a busy client reads them late)
            assert r["t_end_ns"] < t_stop + IDLE_TIMEOUT_S * 1e9 or r["t_first_byte_ns"] > t_cont, r["request_id"]
            assert r["completion_tokens"] == MAX_TOKENS
        else:
            assert "idle timeout" in r["error"], r["error"]
            assert r["t_sent_ns"] < t_cont and r["t_end_ns"] > t_stop, r["request_id"]
            last_byte = max(r["t_sent_ns"], r["t_first_byte_ns"] or 0, r["t_last_token_ns"] or 0)
            assert r["t_end_ns"] - last_byte >= IDLE_TIMEOUT_S * 1e9 * 0.95, r["request_id"]
    cell = doc["cells"][0]
    assert cell["requests"]["by_outcome"] == dict(by)
    deadline = time.monotonic() + 5  # the server logs a finished task from its own thread
    while full_streams(server) < by["ok"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert full_streams(server) >= by["ok"]  # every ok record is a stream the server finished


def test_a_server_killed_mid_cell_is_accounted_request_by_request(server, tmp_path):
    out = tmp_path / "kill.json"
    proc = start_loadgen(server, out, "--contexts", "60,128")
    wait_first_record(out, proc)
    deadline = time.monotonic() + 10  # and the server has logged that stream finished, so its log holds it
    while full_streams(server) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    t_kill = time.monotonic_ns()
    server.proc.kill()
    server.proc.wait(10)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr[-2000:]
    doc, records = outputs(out)
    assert_accounted(doc, records, PER_CELL)
    first, second = doc["cells"]
    assert first["status"] == "failed" and "went away" in first["error"], first.get("error")
    assert second["status"] == "skipped"
    ok = [r for r in records if r["outcome"] == "ok"]
    failed = [r for r in records if r["outcome"] != "ok"]
    assert ok and failed
    assert all(r["t_end_ns"] < t_kill + 50_000_000 and r["completion_tokens"] == MAX_TOKENS for r in ok)
    assert all(r["outcome"] == "connection_error" and r["t_end_ns"] > t_kill for r in failed), \
        [(r["outcome"], r["error"]) for r in failed]
    # the server logs a stream as finished just before its last bytes go out, and a SIGKILL loses the log lines
    # not written yet: every stream its log shows finished reached loadgen as ok, or was in flight at the kill
    cut = [r for r in failed if r["t_sent_ns"] < t_kill]
    assert 1 <= full_streams(server) <= len(ok) + len(cut)
    assert first["requests"]["ok"] == len(ok) and first["requests_not_sent"] == PER_CELL - len(records)
