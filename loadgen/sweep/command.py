"""Running a reconfigure or diagnostics argv: no shell, a time limit, output appended to a log file.

Output goes to a file rather than a pipe: a reconfigure script that starts a server in the background
leaves that server holding whatever stdout it inherited, and a pipe would then never reach end-of-file.
The command runs in its own session so a timeout can end it with everything it started in the
foreground (ssh included); a server it detached with setsid/nohup lives on, as it should.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime

TAIL_BYTES = 16_384


@dataclass
class CommandResult:
    argv: list[str]
    rc: int | None  # None: it did not start, or was killed at the time limit
    elapsed_s: float
    log_path: str
    timed_out: bool = False
    error: str | None = None
    output_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def failure(self) -> str:
        """One line: why the command counts as failed."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"{self.argv[0]} still running after {self.elapsed_s:.0f} s (killed)"
        return f"{self.argv[0]} exited with status {self.rc}" + (f": {last_line(self.output_tail)}"
                                                                   if self.output_tail.strip() else "")

    def as_dict(self) -> dict:
        return dict(self.__dict__)


async def run_command(argv: list[str], log_path: str, timeout_s: float, title: str) -> CommandResult:
    """Run `argv` (at most `timeout_s`); its stdout and stderr are appended to `log_path` after a header."""
    t0 = time.monotonic()
    log, start = _open_log(log_path, f"==== {title} at {datetime.now(UTC).isoformat(timespec='seconds')}: "
                                     f"{argv}\n")
    with log:
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=log,
                                                        stderr=asyncio.subprocess.STDOUT,
                                                        start_new_session=True)
        except OSError as exc:
            msg = f"cannot run {argv[0]!r}: {exc.strerror or exc}"
            log.write(f"{msg}\n".encode())
            return CommandResult(argv, None, time.monotonic() - t0, log_path, error=msg, output_tail=msg)
    res = CommandResult(argv, None, 0.0, log_path)
    try:
        res.rc = await asyncio.wait_for(proc.wait(), timeout_s)
    except TimeoutError:
        res.timed_out = True
        await _kill_group(proc)
    except BaseException:
        await _kill_group(proc)
        raise
    res.elapsed_s = time.monotonic() - t0
    res.output_tail = read_tail(log_path, start)
    return res


def _open_log(path: str, header: str):
    """The log opened for appending, after `header`; and the offset where this run's output starts."""
    log = open(path, "ab")  # noqa: SIM115 - handed to the child process, closed by the caller
    start = log.tell()
    log.write(header.encode())
    log.flush()
    return log, start


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig, grace_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
            return
        except TimeoutError:
            continue


def read_tail(path: str, start: int = 0, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of `path` written after offset `start`."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            end = fh.tell()
            fh.seek(max(start, end - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str, width: int | None = 100) -> str:
    """The last non-blank line of `text`, at most `width` characters (None: whole)."""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return (lines[-1][:width] if width else lines[-1]) if lines else ""
