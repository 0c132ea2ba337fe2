"""Secrets and exposure: the API key reaches the target only and is never written anywhere; listeners bind to
loopback by default; sweep placeholders cannot smuggle shell syntax; files follow the umask."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from loadgen.redact import REDACTED, redact
from tests.conftest import ROOT, start_sim
from tests.faults_util import outputs

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

KEY = "sk-live-Q9wX3vT7pL2mN8rB"
BASE_ENV = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def loadgen(*args: str, env: dict | None = None, cwd: Path = ROOT, umask: int = -1):
    return subprocess.run([sys.executable, "-m", "loadgen", *args], check=False, capture_output=True, text=True, timeout=60,
                          cwd=cwd, env={**BASE_ENV, **(env or {})}, umask=umask)


class HeaderRecorder:
    """A stand-in dcgm-exporter on loopback that remembers the headers of every request it gets."""

    def __init__(self):
        self.headers: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                recorder.headers.append(dict(self.headers))
                body = b'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0",modelName="H200"} 412.5\n'
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
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


@pytest.fixture
def recorder():
    r = HeaderRecorder()
    yield r
    r.close()


def every_output(tmp_path: Path, *procs) -> list[tuple[str, str]]:
    files = [(str(p), p.read_text(errors="replace")) for p in tmp_path.rglob("*") if p.is_file()]
    return files + [(f"{name} of run {i}", text) for i, proc in enumerate(procs)
                    for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr))]


@pytest.mark.sim
def test_the_key_reaches_only_the_target_and_is_never_written(tmp_path, recorder):
    # the simulator requires the key and, like SGLang, echoes it in /server_info
    (tmp_path / "sim").mkdir()
    sim = start_sim(tmp_path / "sim", "--speed", "8", "--api-key-env", "SIM_KEY", "--crash-after", "15",
                    env={"SIM_KEY": KEY})
    try:
        out = tmp_path / "out" / "r.json"
        out.parent.mkdir()
        common = ("--url", sim.url, "--concurrency", "2,4", "--contexts", "60", "--max-tokens", "32",
                  "--requests-per-cell", "8", "--dcgm", recorder.url, "--telemetry-interval", "0.2")
        run = loadgen(*common, "--out", str(out), env={"OPENAI_API_KEY": KEY})
        # the server died in the second cell: connection errors are in the records too
        assert run.returncode == 1, run.stderr
        doc, records = outputs(out)
        assert doc["target"]["server_info"]["api_key"] == REDACTED
        assert {r["outcome"] for r in records} >= {"ok", "connection_error"}
        refused = loadgen(*common, "--out", str(tmp_path / "out" / "refused.json"), "--wait-ready", "0",
                          env={"OPENAI_API_KEY": KEY[::-1]})  # a wrong key: refused, and not echoed either
        assert refused.returncode == 2
    finally:
        sim.stop()
    leaks = [where for where, text in every_output(tmp_path, run, refused) if KEY in text or KEY[::-1] in text]
    assert leaks == []
    assert recorder.headers, "the dcgm stand-in was never scraped"
    assert all("Authorization" not in h and KEY not in str(h) for h in recorder.headers)


@pytest.mark.unit
def test_there_is_no_key_flag(cli):
    # a key typed on the command line would show in `ps` and in shell history
    proc = cli("--api-key", KEY, unset=("OPENAI_API_KEY",))
    assert proc.returncode == 2
    assert "there is no --api-key flag" in proc.stderr
    assert KEY not in proc.stderr


@pytest.mark.unit
def test_redact_blanks_secret_fields_and_any_string_holding_the_key():
    info = {"api_key": KEY, "admin_api_key": None, "hf_token": "hf_abc", "max_total_tokens": 4096,
            "tokenizer_path": "/models/kimi", "internal_states": [{"launch_cmd": f"sglang --api-key {KEY}"}],
            "speculative_ddtree_budget": 16}
    assert redact(info, KEY) == {
        "api_key": REDACTED, "admin_api_key": None, "hf_token": REDACTED, "max_total_tokens": 4096,
        "tokenizer_path": "/models/kimi", "internal_states": [{"launch_cmd": REDACTED}],
        "speculative_ddtree_budget": 16}


def listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if int(p, 16) == port and state == "0A":  # LISTEN
                    found.add(addr)
    return found


@pytest.mark.sim
def test_listeners_bind_loopback_by_default(tmp_path):
    from exporters.live import LiveExporter

    async def exporter_port() -> tuple[int, set[str]]:
        exp = LiveExporter("r1", linger_s=0)
        await exp.start()
        try:
            return exp.port, listening_addresses(exp.port)
        finally:
            await exp.aclose()

    port, addrs = asyncio.run(exporter_port())
    assert addrs == {"0100007F"}, (port, addrs)  # 127.0.0.1, little-endian hex
    sim = start_sim(tmp_path, "--speed", "8")
    try:
        port = int(sim.url.rsplit(":", 1)[1])
        assert sim.url.startswith("http://127.0.0.1:")
        assert listening_addresses(port) == {"0100007F"}
    finally:
        sim.stop()


@pytest.mark.sim
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_files_follow_the_umask_and_no_temp_file_is_left(umask, mode, tmp_path):
    out = tmp_path / "r.json"
    proc = loadgen("--concurrency", "2", "--contexts", "60", "--max-tokens", "16", "--requests-per-cell", "4",
                   "--out", str(out), "--server-metrics", "off", umask=umask)
    assert proc.returncode == 0, proc.stderr
    for path in (out, tmp_path / "r.requests.jsonl"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.requests.jsonl"]


@pytest.mark.unit
@pytest.mark.parametrize("value", ['"16; touch PWNED"', '"$(touch PWNED)"', '"16 && touch PWNED"',
                                   '"--config=/etc/shadow"', '"`touch PWNED`"', '"16\\ntouch PWNED"'])
def test_sweep_placeholders_cannot_carry_shell_syntax(value, tmp_path, cli, monkeypatch):
    marker = tmp_path / "ran.txt"
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f"""
name = "hostile"
reconfigure = ["{sys.executable}", "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])", "{marker}",
               "bash -c 'reconfig {{budget}}'"]
[server]
url = "http://127.0.0.1:9"
[matrix]
contexts = [60]
concurrency = [1]
[[configs]]
name = "evil"
budget = {value}
""")
    monkeypatch.chdir(tmp_path)  # where a smuggled `touch PWNED` would write
    proc = cli("sweep", str(sweep), "--out-dir", str(tmp_path / "out"), unset=("OPENAI_API_KEY",))
    assert proc.returncode == 2, proc.stderr
    assert "has characters a shell or a program could misread" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not marker.exists() and not (tmp_path / "PWNED").exists()
