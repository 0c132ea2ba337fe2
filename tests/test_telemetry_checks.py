"""Telemetry you asked for is there, or you are told: every requested source is tried before any load (exit 2
with one line naming the fix), and a source lost mid-run is a warning line at the cell's end and in its note.
Real loadgen processes, a real simulator, and a real dcgm-exporter stand-in on loopback."""

from __future__ import annotations

import importlib.util
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import run_loadgen, said_lines
from tests.faults_util import outputs

pytestmark = [pytest.mark.sim, pytest.mark.untimed]  # nothing here is timed against the machine

ARGS = ("--concurrency", "2", "--contexts", "60", "--max-tokens", "16", "--requests-per-cell", "4")
DCGM_TEXT = b'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0",modelName="H200"} 412.5\n'


def refused(tmp_path, sim, *flags: str):
    """The run with `flags`: exit 2 and its one line, with nothing sent to the server."""
    run = run_loadgen("--url", sim.url, *ARGS, *flags, "--out", str(tmp_path / "r.json"))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert sim.truth_rows() == []  # checked before discovery, prompt sizing and any load
    return lines[0]


def test_an_unreachable_dcgm_exporter_is_refused(tmp_path, sim_factory):
    line = refused(tmp_path, sim_factory("--speed", "8"), "--dcgm", "http://127.0.0.1:1/metrics")
    assert line.startswith("loadgen: error: --dcgm http://127.0.0.1:1/metrics: cannot reach it (")
    assert line.endswith("); check the address, or leave --dcgm out")


def test_a_page_that_is_not_dcgm_exporter_is_refused(tmp_path, sim_factory):
    sim = sim_factory("--speed", "8")
    line = refused(tmp_path, sim, "--dcgm", sim.url + "/metrics")  # SGLang's metrics, not a GPU's
    assert line == (f"loadgen: error: --dcgm {sim.url}/metrics does not look like dcgm-exporter (no "
                    "DCGM_FI_DEV_POWER_USAGE in its answer); give a dcgm-exporter /metrics URL (port 9400 by "
                    "default), or leave --dcgm out")


def test_unreachable_server_metrics_are_refused(tmp_path, sim_factory):
    line = refused(tmp_path, sim_factory("--speed", "8"), "--server-metrics", "http://127.0.0.1:1/metrics")
    assert line.startswith("loadgen: error: --server-metrics http://127.0.0.1:1/metrics: cannot reach it (")


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="nvidia-ml-py is installed here")
def test_nvml_without_its_library_is_refused(tmp_path, sim_factory):
    line = refused(tmp_path, sim_factory("--speed", "8"), "--nvml")
    assert line == ("loadgen: error: --nvml: NVML unavailable: the nvidia-ml-py package is not installed (pip "
                    "install nvidia-ml-py); or read power from dcgm-exporter with --dcgm URL")


class DyingExporter:
    """A dcgm-exporter stand-in that answers its first `answers` scrapes, then HTTP 503 for good."""

    def __init__(self, answers: int):
        self.left = answers
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                exporter.left -= 1
                status, body = (200, DCGM_TEXT) if exporter.left >= 0 else (503, b"gone\n")
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_a_source_lost_mid_run_is_said_at_the_cell_end(tmp_path, sim_factory):
    sim = sim_factory("--speed", "8")
    exporter = DyingExporter(answers=2)  # the check before the run, and the first cell's first scrape
    try:
        out = tmp_path / "r.json"
        run = run_loadgen("--url", sim.url, "--concurrency", "2,4", "--contexts", "60", "--max-tokens", "200",
                          "--requests-per-cell", "8", "--dcgm", exporter.url, "--telemetry-interval", "0.1",
                          "--out", str(out))
    finally:
        exporter.close()
    assert run.returncode == 0, run.stderr  # the load itself was measured
    doc, _ = outputs(out)
    warnings = [ln for ln in said_lines(run.stderr) if ln.startswith("warning: TELEMETRY LOST (--dcgm): ")]
    assert len(warnings) == 2, run.stderr  # one per cell
    assert f"{exporter.url} stopped answering" in warnings[0]
    assert "no dcgm-exporter answered" in warnings[1]
    for cell, line in zip(doc["cells"], warnings, strict=True):
        assert cell["warnings"][0] == line.removeprefix("warning: ")
        assert line.removeprefix("warning: ")[:60] in run.stdout  # the row's note
