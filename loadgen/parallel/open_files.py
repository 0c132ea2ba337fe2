"""The open-file limit, and how many concurrent streams one process can hold under it.

Every stream is one socket, one file descriptor of the process that holds it; a process needs a few more
besides (`RESERVE`: the event loop, the JSONL, pipes to worker processes, telemetry connections, the Python
runtime's own). Before any load, `raise_open_file_limit` lifts the soft limit to the hard one (any process
may), and `check_open_files` refuses a run whose busiest process would need more than its limit, naming the
`--workers` that spreads the streams over processes of which each holds its share (workers inherit the
parent's limit).
"""

from __future__ import annotations

import math
from types import ModuleType

from loadgen.errors import UsageError

RESERVE = 64

resource: ModuleType | None
try:
    import resource
except ImportError:  # not on Linux or macOS: no limit to read or raise
    resource = None


def raise_open_file_limit() -> tuple[int, int] | None:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit where the OS allows; (soft, hard) after, or
    None where there is no such limit (unlimited counts as a very large number)."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # macOS: a hard limit of "unlimited" is refused above OPEN_MAX
            pass
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    big = 1 << 30
    return (big if soft == resource.RLIM_INFINITY else soft), (big if hard == resource.RLIM_INFINITY else hard)


def streams_per_process(soft: int) -> int:
    """Streams one process can hold under an open-file limit of `soft` = soft − RESERVE (at least 1)."""
    return max(1, soft - RESERVE)


def workers_needed(streams: int, soft: int) -> int:
    """The fewest processes that hold `streams` between them = ⌈streams / streams_per_process⌉."""
    return math.ceil(streams / streams_per_process(soft))


def check_open_files(streams: int, workers: int, soft: int, hard: int) -> None:
    """UsageError when the busiest process (⌈streams / workers⌉ streams) would need more open files than
    `soft` allows, saying how many it can hold and which `--workers` holds them all."""
    share = math.ceil(streams / max(1, workers))
    per = streams_per_process(soft)
    if share <= per:
        return
    spread = "" if workers <= 1 else f" over {workers} workers"
    limit = f"{soft}" if soft == hard else f"{soft} (hard {hard})"
    # one line within 120 columns; how to raise the hard limit (ulimit -Hn, LimitNOFILE=, docker --ulimit) is
    # in docs/performance.md
    raise UsageError(f"--concurrency {streams}{spread}: ulimit -n {limit} allows {per} streams a process; use "
                     f"--workers {workers_needed(streams, soft)} or raise it")
