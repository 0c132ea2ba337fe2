"""The simulator as a restartable service, for sweeps that restart it per configuration (as `systemctl
restart` does a real server): `--pidfile`, `--detach` and `--exit-idle`.

- `--pidfile FILE`: before starting, the simulator FILE names (if it is still running, and is a loadgen
  simulator) is stopped: SIGTERM, then SIGKILL after STOP_WAIT_S; then this one's pid is written there.
- `--detach LOG`: start the simulator in its own session with its output in LOG, wait until it says it is
  ready (or fails), say so, and return: the sweep's reconfigure command ends while the server runs on.
- `--exit-idle S`: the server stops itself once no request has been served for S seconds, so the last
  configuration's simulator does not outlive its sweep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_WAIT_S = 10.0
READY_WAIT_S = 30.0
POLL_S = 0.05


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def _is_simulator(pid: int) -> bool:
    """The process is a `loadgen sim` (a pid in a stale file may since belong to anything else)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"loadgen" in argv and b"sim" in argv


def stop_previous(pidfile: str) -> int | None:
    """Stop the simulator `pidfile` names, if one runs; returns its pid (None when there was none)."""
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid() or not _alive(pid) or not _is_simulator(pid):
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


def write_pid(pidfile: str, pid: int) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(pidfile)), exist_ok=True)
    Path(pidfile).write_text(f"{pid}\n")


def without_detach(argv: list[str]) -> list[str]:
    """`argv` less its `--detach LOG` (or `--detach=LOG`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--detach":
            skip = True
        elif not a.startswith("--detach="):
            out.append(a)
    return out


def detach(argv: list[str], log_path: str) -> int:
    """Run `loadgen sim argv` (less --detach) in its own session, output in `log_path`; 0 once it is ready,
    1 (its log's tail on stderr) when it exits first or is not ready within READY_WAIT_S."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "ab") as log:
        start = log.tell()
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "sim", *without_detach(argv)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        text = Path(log_path).read_bytes()[start:].decode(errors="replace")
        ready = next((line for line in text.splitlines() if "ready on" in line), None)
        if ready:
            print(f"{ready} (pid {proc.pid}, output in {log_path})", flush=True)
            return 0
        if proc.poll() is not None:
            sys.stderr.write(f"loadgen sim exited with status {proc.returncode}: {text[-2000:]}")
            return 1
        time.sleep(POLL_S)
    proc.kill()
    sys.stderr.write(f"loadgen sim was not ready within {READY_WAIT_S:g} s; see {log_path}\n")
    return 1
