"""Shared fixtures: the simulator as a real subprocess on a free loopback port, and loadgen as a real CLI."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class SimHandle:
    def __init__(self, proc: subprocess.Popen, url: str, truth: Path):
        self.proc = proc
        self.url = url
        self.truth = truth

    def truth_rows(self) -> list[dict]:
        from loadgen.sim.truth import read_truth
        return read_truth(str(self.truth)) if self.truth.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_sim(tmp_path: Path, *args: str, name: str = "truth.jsonl", env: dict | None = None) -> SimHandle:
    truth = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "sim", "--port", "0", "--truth", str(truth), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if b"ready on" in line or not line:
            break
    m = re.search(rb"ready on (http://\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"simulator did not start: {line!r} {proc.stderr.read()[:500]!r}")
    return SimHandle(proc, m.group(1).decode(), truth)


@pytest.fixture
def sim_factory(tmp_path):
    started: list[SimHandle] = []

    def factory(*args: str, **kw) -> SimHandle:
        h = start_sim(tmp_path, *args, **kw)
        started.append(h)
        return h

    yield factory
    for h in started:
        h.stop()


def run_loadgen(*args: str, timeout: float = 120, env: dict | None = None, cwd: Path | None = None):
    """Run the real CLI; returns CompletedProcess with text stdout/stderr."""
    return subprocess.run([sys.executable, "-m", "loadgen", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env={**os.environ, **(env or {})})


@contextlib.asynccontextmanager
async def serve_metrics_app(app):
    """Serve an aiohttp app on a free loopback port; yields its /metrics URL."""
    from aiohttp import web
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await runner.cleanup()
