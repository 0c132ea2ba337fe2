"""Ctrl-C and SIGTERM during a run.

The first signal stops scheduling: no new request is sent, the requests in flight may finish for at most
`--drain-timeout` seconds, the cell is summarised and the cells not reached are recorded as skipped. The
second signal (or the end of the drain time) cancels the requests still in flight; each is recorded as
`cancelled`. Records and results are written either way (a run stopped before its results file was first
written says so, and names no file), and the exit code is 128 + the signal number:
130 for SIGINT, 143 for SIGTERM. A third signal exits at once (the records already ended are on disk: the
JSONL is flushed as each request ends). The last lines name the results and the exact command that resumes
them (given by the CLI), wrapped at 120 columns as shell lines.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from collections.abc import Awaitable, Callable

from loadgen.console import log
from loadgen.run.control import RunControl

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """`await interrupts.guard(run)`: runs the coroutine function `run` with the signal handlers installed
    and returns its exit code, or 128 + the signal number when interrupted."""

    def __init__(self, control: RunControl, drain_timeout_s: float, results_path: str,
                 resume_command: list[str] | None = None):
        self.control = control
        self.drain_timeout_s = drain_timeout_s
        self.results_path = results_path
        self.resume_command = resume_command
        self.signum: int | None = None
        self.count = 0
        self.main_task: asyncio.Task | None = None
        self._drain_timer: asyncio.TimerHandle | None = None

    async def guard(self, run: Callable[[], Awaitable[int]]) -> int:
        loop = asyncio.get_running_loop()
        self.main_task = task = asyncio.current_task()
        assert task is not None  # a coroutine runs in a task
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.on_signal, sig)
        try:
            rc = await run()
        except asyncio.CancelledError:
            if self.signum is None:
                raise
            task.uncancel()
            rc = None
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
            if self._drain_timer is not None:
                self._drain_timer.cancel()
        if self.signum is None:
            assert rc is not None  # only a signal's cancel leaves it None
            return rc
        log(self.final_line())
        return 128 + self.signum

    def final_line(self) -> str:
        """The run's last word: where its results are, or that there are none (interrupted before the results
        file was first written, at setup: a file that was never written is never named)."""
        assert self.signum is not None, "said after a signal only"
        name = signal.Signals(self.signum).name
        if os.path.exists(self.results_path):
            line = f"interrupted by {name}; results: {self.results_path}"
            if self.resume_command:
                line += "\n" + "\n".join(shell_lines(self.resume_command, "resume with:"))
            return line
        return f"interrupted by {name} before the first cell: nothing was measured, no results file was written"

    def on_signal(self, sig: int) -> None:
        self.count += 1
        name = signal.Signals(sig).name
        control = self.control
        if self.count == 1:
            self.signum = control.interrupted_by = sig
            in_flight = control.in_flight()
            control.stop(f"not measured: interrupted by {name}")
            if in_flight:
                log(f"\n{name}: no new requests; {in_flight} in flight may finish within "
                    f"{self.drain_timeout_s:g} s (--drain-timeout); {name} again cancels them")
            else:
                log(f"\n{name}: stopping (no request in flight)")
            self._drain_timer = asyncio.get_running_loop().call_later(self.drain_timeout_s, control.cancel_load)
        elif self.count == 2:
            log(f"{name} again: cancelling the requests in flight")
            if not control.cancel_load() and self.main_task is not None:
                self.main_task.cancel()  # not in a cell (setting up, or waiting for the server)
        else:
            log(f"{name} a third time: exiting now")
            os._exit(128 + (self.signum or sig))


def shell_lines(argv: list[str], first: str, width: int = 120) -> list[str]:
    """`first`, then the command quoted for a shell, on lines of at most `width` columns continued by a
    backslash (a word longer than a line stands alone)."""
    lines, line = [], first
    for word in map(shlex.quote, argv):
        if len(line) + 1 + len(word) + 2 > width and line.strip() != first.strip():
            lines.append(line + " \\")
            line = "   "
        line += " " + word
    return lines + [line]
