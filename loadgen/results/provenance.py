"""What a results file says about where and when it was measured: the run's environment, and each cell's
wall-clock edges (to line a cell up with Grafana, dcgm-exporter or the server's log)."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from loadgen import __version__
from loadgen.record import RunAnchor
from loadgen.results.figures import WallClock, WindowNs

GIT_TIMEOUT_S = 5.0


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_checkout() -> dict | None:
    """{commit, modified} of the git checkout loadgen runs from (an editable install), None when it was
    installed from a package. `modified`: tracked files differ from the commit."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "modified": None if status is None else bool(status)}


def environment() -> dict:
    """The machine and software that measured: Python, platform, CPU count (and the CPUs this process may
    use), loadgen's version and, from a checkout, its git commit."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "loadgen_version": __version__,
        "git": source_checkout(),
    }


def _iso_utc(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wall_clock(window_ns: WindowNs | None, anchor: RunAnchor) -> WallClock | None:
    """A cell's measured window in calendar time: {start, end} as ISO 8601 UTC and {start_unix_s,
    end_unix_s}, from its monotonic edges (`window_ns`: first send, last end) through the run's anchor."""
    start_ns, end_ns = (window_ns or {}).get("start_ns"), (window_ns or {}).get("end_ns")
    if start_ns is None or end_ns is None:
        return None
    start_s, end_s = anchor.wall_s(start_ns), anchor.wall_s(end_ns)
    return {"start": _iso_utc(start_s), "end": _iso_utc(end_s), "start_unix_s": start_s, "end_unix_s": end_s}
