"""Ctrl-C and SIGTERM during a run.

The first signal stops scheduling: no new request is sent, the requests in flight may finish for at most
`--drain-timeout` seconds, the cell is summarised and the cells not reached are recorded as skipped. The
second signal (or the end of the drain time) cancels the requests still in flight; each is recorded as
`cancelled`. Records and results are written either way, and the exit code is 128 + the signal number:
130 for SIGINT, 143 for SIGTERM. A third signal exits at once (the records already ended are on disk: the
JSONL is flushed as each request ends).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
from loadgen.errors import UsageError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    def __init__(self, runner, drain_timeout_s: float):
        self.runner = runner
        self.drain_timeout_s = drain_timeout_s
        self.signum: int | None = None
        self.count = 0
        self.main_task: asyncio.Task | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._run = runner.run
        runner.run = self.run

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.main_task = asyncio.current_task()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.on_signal, sig)
        try:
            rc = await self._run()
        except asyncio.CancelledError:
            if self.signum is None:
                raise
            self.main_task.uncancel()
            rc = None
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
            if self._drain_timer is not None:
                self._drain_timer.cancel()
        if self.signum is None:
            return rc
        _log(f"interrupted by {signal.Signals(self.signum).name}; results: {self.runner.results_path}")
        return 128 + self.signum

    def on_signal(self, sig: int) -> None:
        self.count += 1
        name = signal.Signals(sig).name
        runner = self.runner
        if self.count == 1:
            self.signum = sig
            runner.stopping = True
            runner.stop_reason = f"not measured: interrupted by {name}"
            if runner.current is not None:
                runner.current.stopping = True
            in_flight = runner.current.in_flight if runner.current is not None and self._loading() else 0
            _log(f"\n{name}: no new requests; {in_flight} in flight may finish within "
                 f"{self.drain_timeout_s:g} s (--drain-timeout); {name} again cancels them")
            self._drain_timer = asyncio.get_running_loop().call_later(self.drain_timeout_s, self._cancel_load)
        elif self.count == 2:
            _log(f"{name} again: cancelling the requests in flight")
            if not self._cancel_load() and self.main_task is not None:
                self.main_task.cancel()  # not in a cell (setting up, or waiting for the server)
        else:
            _log(f"{name} a third time: exiting now")
            os._exit(128 + (self.signum or sig))

    def _loading(self) -> bool:
        load = self.runner.load
        return load is not None and not load.done()

    def _cancel_load(self) -> bool:
        if not self._loading():
            return False
        self.runner.load.cancel()
        return True


def _log(msg: str) -> None:
    from loadgen.runner import log
    log(msg)


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("interrupts")
    g.add_argument("--drain-timeout", type=float, default=30.0, metavar="S",
                   help="after a first Ctrl-C/SIGTERM, let requests in flight finish for at most S seconds, then "
                        "cancel them (default 30); a second Ctrl-C cancels them at once")


def configure(a: argparse.Namespace, cfg) -> None:
    if not a.drain_timeout >= 0:
        raise UsageError(f"--drain-timeout {a.drain_timeout:g} must be ≥ 0 seconds, e.g. 30")
    cfg.extras["drain_timeout_s"] = a.drain_timeout


def install(runner) -> None:
    Interrupts(runner, runner.cfg.extras.get("drain_timeout_s", 30.0))


OPTION_GROUPS.append(add_options)
CONFIGURERS.append(configure)
RUNNER_HOOKS.append(install)
