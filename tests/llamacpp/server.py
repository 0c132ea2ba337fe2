"""llama-server as a real subprocess on a free loopback port, for the real-engine tier.

The binary comes from scripts/build-llama-server.sh, which keeps it in a per-version folder outside the repo
(`${LOADGEN_CACHE:-$HOME/.cache/loadgen}/llama-server-<version>/`).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import stop_process

VERSION = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")
BUILD_HINT = "run scripts/build-llama-server.sh (scripts/test-deps.sh calls it; 10-17 minutes on 2 cores, then cached)"
# the same model as its own draft: every draft token is accepted, so the accept length is n_max + 1
SPEC_ARGS = ("--spec-type", "draft-simple", "--spec-draft-n-min", "0")


def cache_dir() -> Path:
    root = Path(os.environ.get("LOADGEN_CACHE") or Path.home() / ".cache" / "loadgen")
    return root / f"llama-server-{VERSION}"


def binary() -> Path | None:
    path = cache_dir() / "bin" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec_args(model: Path, draft: Path | None, n_max: int = 4, slots: int = 2, ctx_per_slot: int = 512) -> list[str]:
    """The server's flags: `slots` parallel slots of `ctx_per_slot` tokens each, `draft` as draft model."""
    args = ["-m", str(model), "-np", str(slots), "-c", str(slots * ctx_per_slot), "--metrics", "--slots",
            "--chat-template", "chatml", "-t", "1", "-tb", "1"]
    if draft is not None:
        args += ["-md", str(draft), *SPEC_ARGS, "--spec-draft-n-max", str(n_max)]
    return args


@dataclass
class LlamaServer:
    proc: subprocess.Popen
    url: str
    log_path: Path
    args: list[str] = field(default_factory=list)  # the flags it was given (loopback host and port added)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str, timeout: float = 10) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
            return resp.read()

    def metrics(self) -> dict[str, float]:
        """Every unlabelled `llamacpp:` sample of /metrics, by name."""
        out = {}
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith("llamacpp:"):
                name, _, value = line.partition(" ")
                out[name] = float(value.split()[0])
        return out

    def stop(self) -> None:
        stop_process(self.proc)


def start_server(log_dir: Path, args: list[str], timeout_s: float = 60, name: str = "llama-server") -> LlamaServer:
    """Start llama-server with `args` on a free loopback port; return once /health answers 200."""
    exe = binary()
    if exe is None:
        raise RuntimeError(f"llama-server not found in {cache_dir()}; {BUILD_HINT}")
    port = free_port()
    log_path = log_dir / f"{name}.log"
    full = [str(exe), *args, "--host", "127.0.0.1", "--port", str(port)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LlamaServer(proc, f"http://127.0.0.1:{port}", log_path, list(args))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited {proc.returncode}: {server.log()[-2000:]}")
        try:
            if urllib.request.urlopen(server.url + "/health", timeout=2).status == 200:
                return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"llama-server not healthy after {timeout_s:g} s: {server.log()[-2000:]}")


@dataclass
class Task:
    """One task as llama-server's log tells it: the server's own per-request truth."""

    task: int
    prompt_tokens: int | None = None  # prompt tokens evaluated (the cached ones excluded)
    generated: int | None = None
    draft_accepted: int | None = None
    draft_generated: int | None = None
    mean_len: float | None = None


TASK_LINE = re.compile(r"\| task (\d+) \|\s*(.*)$")
EVAL = re.compile(r"^(prompt )?eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
DRAFT = re.compile(r"draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([\d.]+)")


def tasks(log_text: str) -> dict[int, Task]:
    """Every finished task of a llama-server log by task id (a task that printed its timings)."""
    out: dict[int, Task] = {}
    for line in log_text.splitlines():
        m = TASK_LINE.search(line)
        if not m:
            continue
        task_id, rest = int(m.group(1)), m.group(2)
        if ev := EVAL.match(rest):
            t = out.setdefault(task_id, Task(task_id))
            if ev.group(1):
                t.prompt_tokens = int(ev.group(2))
            else:
                t.generated = int(ev.group(2))
        elif dr := DRAFT.search(rest):
            t = out.setdefault(task_id, Task(task_id))
            t.draft_accepted, t.draft_generated, t.mean_len = int(dr.group(1)), int(dr.group(2)), float(dr.group(3))
    return out
