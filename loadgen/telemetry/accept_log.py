"""Accept length from the server's log, read live from a user-given command (e.g. `journalctl -f -u sglang`).

Which lines give an accept length is each engine adapter's (`EngineAdapter.parse_log_line`, loadgen/engines/);
here is the engine-neutral part: following the command, and folding the lines of one cell. SGLang logs, every `--decode-log-interval` decode steps (reference/sglang.md §5):

    [... TP0] Decode batch, #running-req: 8, #token: 2310, token usage: 0.01, accept len: 3.92, accept rate: ...

`accept len` is the mean committed tokens per request per verify step over that window. The cell's figure is

    log = Σ accept_len_i · w_i / Σ w_i,   w_i = #running-req of line i (1 when the line has none)

over the lines that *arrive* while the cell is open (for llama.cpp's lines, below, w_i is the verify steps): a window's verify count is about its steps × its batch,
so weighting by the batch approximates SGLang's own Σaccepted/Σverify. Lines with different DP ranks are
separate lines and are combined the same way.

llama.cpp's llama-server logs one line per request when its slot is released:

    slot print_timing: id  0 | task 12 | draft acceptance = 1.00000 (   24 accepted /    24 generated), mean len =  5.00

`mean len` = 1 + accepted / verify steps of that request, so its verify steps are s_i = round(accepted /
(mean len − 1)), and Σ mean_len_i · s_i / Σ s_i = 1 + Σaccepted / Σs, the server's counter formula. A line with
no accepted drafts (mean len 1) weighs its generated draft tokens, an upper bound of its verify steps.

The command is split like a shell would (shlex) and run without one, once per run: it is started when the
first cell opens and terminated when the run ends. Whatever it prints at launch (journalctl -f first prints
the last 10 lines) is discarded: the first cell opens only after the command has been quiet for `settle_s`
(at most `settle_max_s`). stderr is read with stdout (`docker logs -f` writes the server's stderr there).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shlex
import shutil
import signal
import time
from collections import deque
from dataclasses import dataclass

from loadgen.engines import registry
from loadgen.engines.llamacpp import parse_llama_line
from loadgen.engines.sglang import parse_line
from loadgen.errors import UsageError
from loadgen.telemetry.base import SourceResult

__all__ = ["AcceptLogSource", "LogReader", "LogWindow", "parse_line", "parse_llama_line", "split_command"]


def split_command(cmd: str) -> list[str]:
    """argv of `--accept-log-cmd`, checked: it must parse and its program must exist."""
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--accept-log-cmd {cmd!r}: {exc}; quote it like a shell command") from None
    if not argv:
        raise UsageError("--accept-log-cmd is empty; give a command such as 'journalctl -f -u sglang -o cat'")
    prog = argv[0]
    found = (os.path.isfile(prog) and os.access(prog, os.X_OK)) if os.sep in prog else shutil.which(prog)
    if not found:
        raise UsageError(f"--accept-log-cmd: program {prog!r} not found or not executable; "
                         "install it or give its full path")
    return argv


@dataclass
class LogWindow:
    """Running sums of the decode lines that arrived while one cell was open."""

    lines: int = 0
    weighted_sum: float = 0.0
    weight: float = 0.0
    unweighted_lines: int = 0
    zero_lines: int = 0
    weighted_by: str = "running_req"

    def add(self, accept: float, running: int | None, weighted_by: str = "running_req") -> None:
        self.weighted_by = weighted_by
        w = float(running) if running else 1.0
        if not running:
            self.unweighted_lines += 1
        if accept == 0:
            self.zero_lines += 1
        self.lines += 1
        self.weighted_sum += accept * w
        self.weight += w

    def value(self) -> float | None:
        return self.weighted_sum / self.weight if self.weight else None


class LogReader:
    """One long-lived log command per run; cells open and close windows on it in turn."""

    def __init__(self, argv: list[str], settle_s: float = 0.3, settle_max_s: float = 5.0):
        self.argv = argv
        self.settle_s = settle_s
        self.settle_max_s = settle_max_s
        self.proc: asyncio.subprocess.Process | None = None
        self.window: LogWindow | None = None
        self.lines_total = 0
        self.lines_outside = 0  # decode lines that arrived while no cell was open
        self.discarded_at_start = 0
        self.tail: deque[str] = deque(maxlen=3)  # last non-decode output, for error messages
        self._last_line_ns = 0
        self._task: asyncio.Task | None = None

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def exit_reason(self) -> str | None:
        if self.proc is None or self.proc.returncode is None:
            return None
        said = f": {self.tail[-1]}" if self.tail else ""
        return f"the log command {self.command!r} exited with status {self.proc.returncode}{said}"

    async def ensure_started(self) -> None:
        if self.proc is not None:
            return
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, limit=1 << 20, start_new_session=True)
        except OSError as exc:
            raise UsageError(f"--accept-log-cmd {self.command!r} could not start: {exc.strerror}") from None
        _LIVE_PIDS.add(self.proc.pid)
        self._task = asyncio.create_task(self._read())
        t0 = self._last_line_ns = time.monotonic_ns()
        while self.proc.returncode is None:  # discard the launch backlog
            now = time.monotonic_ns()
            if now - self._last_line_ns >= self.settle_s * 1e9 or now - t0 >= self.settle_max_s * 1e9:
                break
            await asyncio.sleep(0.05)
        self.discarded_at_start = self.lines_outside
        if self.proc.returncode is not None:
            await asyncio.sleep(0.05)  # let the reader take the last words
            raise UsageError(f"--accept-log-cmd: {self.exit_reason()}; give a command that follows the log "
                             "(e.g. journalctl -f, tail -F, docker logs -f)")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            try:
                raw = await self.proc.stdout.readline()
            except ValueError:  # a line over the 1 MiB limit: dropped
                continue
            if not raw:
                break
            self._last_line_ns = time.monotonic_ns()
            line = raw.decode("utf-8", "replace").rstrip()
            reading = registry.parse_log_line(line)
            if reading is None:
                if line:
                    self.tail.append(line[:200])
                continue
            self.lines_total += 1
            if self.window is not None:
                self.window.add(reading.accept_length, reading.weight, reading.weighted_by)
            else:
                self.lines_outside += 1
        await self.proc.wait()
        _LIVE_PIDS.discard(self.proc.pid)

    async def open_window(self) -> LogWindow:
        await self.ensure_started()
        await asyncio.sleep(0.01)  # lines already in the pipe were written before the cell: read them first
        self.window = LogWindow()
        return self.window

    async def close_window(self) -> LogWindow:
        await asyncio.sleep(0.01)  # lines written in the cell's last moments are still in the pipe
        w, self.window = self.window, None
        assert w is not None, "closed after open_window only"
        return w

    async def close(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: journalctl/ssh children go too
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        if self._task is not None:
            self._task.cancel()
        _LIVE_PIDS.discard(self.proc.pid)


class AcceptLogSource:
    """One cell's window on a run's `LogReader`."""

    name = "accept_log"
    kind = "accept_length"

    def __init__(self, reader: LogReader):
        self.reader = reader
        self.window: LogWindow | None = None

    async def start(self) -> None:
        self.window = await self.reader.open_window()

    async def stop(self) -> SourceResult:
        w = await self.reader.close_window()
        values = {"command": self.reader.command, "lines": w.lines,
                  "lines_outside_cells": self.reader.lines_outside,
                  "weighted_by": w.weighted_by if w.unweighted_lines < w.lines else "none"}
        value = w.value()
        died = self.reader.exit_reason()
        if value is None or w.zero_lines == w.lines:
            if died:
                reason = died
            elif w.lines:
                reason = "the log lines of the cell show accept len 0 (speculative decoding off)"
            else:
                reason = ("no " + " nor ".join(registry.log_lines()) + " arrived during the cell; is the command "
                          "following the right log?")
            values["unavailable"] = {"log": reason}
            return SourceResult(self.name, self.kind, False, values, reason=reason,
                                warnings=[f"accept log: {died}"] if died else [])
        values["per_source"] = {"log": value}
        values["unavailable"] = {}
        return SourceResult(self.name, self.kind, True, values,
                            warnings=[f"accept log: {died}"] if died else [])


_LIVE_PIDS: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    """A run that ended without its runner hook (a crash) must not leave the log command behind."""
    for pid in list(_LIVE_PIDS):
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
