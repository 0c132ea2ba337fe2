"""Restart llama-server with a draft budget, as a sweep's `reconfigure` does a real server (`systemctl restart`):
stop the llama-server the pidfile names, start the new one in its own session with its output in LOG, write
its pid, and return once it is launched. Whether it is ready is the sweep's readiness gate to find out.

    python3 benchmarks/llamacpp_restart.py --pidfile P --log LOG --port 30124 --model T.gguf \
        [--draft D.gguf --draft-n-max N] [--slots 4] [--ctx-per-slot 512] [--threads 1]
    python3 benchmarks/llamacpp_restart.py --pidfile P --stop      # stop it, start nothing

`--draft-n-max 0` (or no `--draft`) starts the server without a draft model, so one argv template with a
`{n_max}` placeholder covers the configuration without speculative decoding too. Exit 1 (with the log's tail)
when the new server exits within its first `EARLY_EXIT_S` (a bad flag, a missing model file).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_WAIT_S = 10.0
EARLY_EXIT_S = 0.5
POLL_S = 0.05
# a draft model proposing greedily, with no minimum: every verify step carries up to n_max draft tokens
SPEC_FLAGS = ("--spec-type", "draft-simple", "--spec-draft-n-min", "0")


def llama_server() -> Path:
    """The binary scripts/build-llama-server.sh keeps outside the repository."""
    root = Path(os.environ.get("LOADGEN_CACHE") or Path.home() / ".cache" / "loadgen")
    return root / f"llama-server-{os.environ.get('LLAMA_CPP_PYTHON_VERSION', '0.3.36')}" / "bin" / "llama-server"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def _is_llama_server(pid: int) -> bool:
    """A pid in a stale pidfile may since belong to anything else: only a llama-server is stopped."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return argv0.endswith(b"llama-server")


def stop_previous(pidfile: Path) -> int | None:
    """SIGTERM the llama-server `pidfile` names, SIGKILL after STOP_WAIT_S; its pid, or None when none ran."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    if not _alive(pid) or not _is_llama_server(pid):
        return None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return pid
        deadline = time.monotonic() + STOP_WAIT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if not _alive(pid):
            break
    return pid


def server_argv(a: argparse.Namespace) -> list[str]:
    argv = [str(llama_server()), "-m", str(a.model), "-np", str(a.slots), "-c", str(a.slots * a.ctx_per_slot),
            "--metrics", "--slots", "--chat-template", "chatml", "-t", str(a.threads), "-tb", str(a.threads),
            "--host", "127.0.0.1", "--port", str(a.port)]
    if a.draft is not None and a.draft_n_max > 0:
        argv += ["-md", str(a.draft), *SPEC_FLAGS, "--spec-draft-n-max", str(a.draft_n_max)]
    return argv


def start(a: argparse.Namespace) -> int:
    argv = server_argv(a)
    a.log.parent.mkdir(parents=True, exist_ok=True)
    with open(a.log, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    a.pidfile.write_text(f"{proc.pid}\n")
    try:
        code = proc.wait(EARLY_EXIT_S)
    except subprocess.TimeoutExpired:
        print(f"started llama-server pid {proc.pid} (draft n_max {a.draft_n_max if a.draft else 0}), log {a.log}")
        return 0
    tail = a.log.read_text(errors="replace")[-2000:]
    print(f"llama-server exited {code} at once:\n{tail}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pidfile", type=Path, required=True)
    p.add_argument("--stop", action="store_true", help="stop the server the pidfile names and start nothing")
    p.add_argument("--log", type=Path)
    p.add_argument("--port", type=int)
    p.add_argument("--model", type=Path)
    p.add_argument("--draft", type=Path, default=None)
    p.add_argument("--draft-n-max", type=int, default=0, help="draft tokens per verify step; 0: no draft model")
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--ctx-per-slot", type=int, default=512)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    stopped = stop_previous(a.pidfile)
    if a.stop:
        print(f"stopped llama-server pid {stopped}" if stopped else "no llama-server was running")
        return 0
    if a.log is None or a.port is None or a.model is None:
        p.error("--log, --port and --model are required to start a server")
    return start(a)


if __name__ == "__main__":
    sys.exit(main())
