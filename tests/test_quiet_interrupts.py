"""Quiet interrupts: a terminal's double Ctrl-C (SIGINT to the whole process group) during a run against the
built-in simulator cancels the streams in flight and prints no traceback from any process, only loadgen's
own few lines. A real loadgen process, its real simulator child, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, said_lines
from tests.faults_util import outputs

pytestmark = pytest.mark.sim

# ~3 s streams at --sim-speed 8: both signals land mid-stream however late a busy machine delivers them
ARGS = ("--concurrency", "8,16", "--contexts", "60", "--max-tokens", "6000", "--requests-per-cell", "16",
        "--sim-speed", "8", "--server-metrics", "off")


def wait_for(path, text: str, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, path.read_text()
        time.sleep(0.02)


def test_a_second_ctrl_c_prints_no_traceback(tmp_path):
    out, err = tmp_path / "r.json", tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", *ARGS, "--out", str(out)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True)
    try:
        wait_for(err, " cells", proc)  # "run …: N cells": the first cell's load is being sent
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        wait_for(err, "SIGINT: no new requests", proc)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    _, records = outputs(out)
    assert [r["outcome"] for r in records] == ["cancelled"] * 8  # streams really were cut mid-way
    assert "Traceback" not in text and "Error handling request" not in text, text
    # the start-up lines, the table header, one line per signal, the cell's row and where the results are
    assert len(said_lines(text.strip())) <= 14, text  # as said, before wrapping at 120 columns
