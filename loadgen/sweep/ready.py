"""Bringing a configuration up: run its reconfigure command while the readiness gate watches the server,
with progress on stderr; and the diagnostics command when a configuration fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time

from loadgen.console import WIDTH, log
from loadgen.sweep.command import CommandResult, last_line, read_tail, run_command
from loadgen.sweep.spec import Config, SweepSpec
from loadgen.target.readiness import ReadyResult, wait_ready

PROGRESS_EVERY_S = 15.0


class WaitProgress:
    """Progress while a configuration is not ready yet: elapsed time, the gate's state, and the last line
    the reconfigure command printed. On a terminal one line is redrawn while it fits; otherwise a line is
    printed when the state changes and every 15 s."""

    def __init__(self, name: str, timeout_s: float, log_path: str):
        self.name, self.timeout_s, self.log_path = name, timeout_s, log_path
        self.tty = sys.stderr.isatty()
        self.last_state = ""
        self.last_print = 0.0
        self.reconf: asyncio.Task | None = None
        self.log_start = 0
        self.drawn = False  # a redrawn line is on the terminal, not ended yet

    def __call__(self, elapsed_s: float, gate_state: str) -> None:
        line = f"  [{self.name}] waiting {elapsed_s:5.1f} s of {self.timeout_s:g} s: {gate_state}"
        if self.reconf is not None and not self.reconf.done():
            tail = read_tail(self.log_path, self.log_start, 2048)
            out = last_line("\n".join(ln for ln in tail.splitlines() if not ln.startswith("==== ")), None)
            line += "; reconfigure running" + (f" ({out})" if out else "")
        now = time.monotonic()
        if self.tty and len(line) < WIDTH:  # a longer line is said whole (wrapped), never cut to one row
            sys.stderr.write("\r" + line.ljust(WIDTH - 1) + ("\n" if gate_state == "ready" else ""))
            sys.stderr.flush()
            self.drawn = gate_state != "ready"
        elif gate_state != self.last_state or now - self.last_print >= PROGRESS_EVERY_S:
            self.close()
            log(line)
            self.last_print = now
        self.last_state = gate_state

    def close(self) -> None:
        """End a redrawn line that did not end in "ready", so the next message starts on its own line."""
        if self.drawn:
            sys.stderr.write("\n")
            self.drawn = False


async def reconfigure_and_wait(spec: SweepSpec, cfg: Config, session, log_path: str, headers: dict,
                               attempt: dict) -> str | None:
    """Run the reconfigure command while the readiness gate watches the server. None when ready, else why
    not. The attempt dict gets the command's and the gate's results."""
    r = spec.readiness
    progress = WaitProgress(cfg.name, cfg.timeout_s, log_path)
    progress.log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    reconf_timeout_s = r.reconfigure_timeout_s or cfg.timeout_s
    reconf = asyncio.create_task(run_command(cfg.reconfigure, log_path, reconf_timeout_s,
                                             f"reconfigure {cfg.name}"))
    progress.reconf = reconf
    gate = asyncio.create_task(wait_ready(
        session, cfg.url, spec.api, spec.model, timeout_s=cfg.timeout_s, poll_s=r.poll_s,
        successes=r.successes, expect=cfg.expect or None, after=reconf, progress=progress, headers=headers,
        request_timeout_s=r.request_timeout_s))
    try:
        await asyncio.wait({reconf, gate}, return_when=asyncio.FIRST_COMPLETED)
        if reconf.done() and not reconf.result().ok:
            gate.cancel()
            cmd: CommandResult = reconf.result()
            attempt["reconfigure"] = cmd.as_dict()
            return f"reconfigure failed: {cmd.failure()}"
        ready: ReadyResult = await gate
        attempt["readiness"] = ready.as_dict()
        if not reconf.done():
            reconf.cancel()
            attempt["reconfigure"] = {"argv": cfg.reconfigure, "rc": None, "timed_out": True,
                                      "error": "still running when the readiness gate gave up (killed)"}
        else:
            attempt["reconfigure"] = reconf.result().as_dict()
        return None if ready.ready else ready.reason
    finally:
        progress.close()
        for task in (reconf, gate):
            if not task.done():
                task.cancel()
                # already leaving (failed or interrupted): the first error is the one to report
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


async def run_diagnostics(spec: SweepSpec, cfg: Config, paths: dict, reason: str) -> dict | None:
    if not cfg.diagnostics:
        return None
    res = await run_command(cfg.diagnostics, paths["diagnostics"], spec.readiness.diagnostics_timeout_s,
                            f"diagnostics {cfg.name} ({reason})")
    log(f"  [{cfg.name}] diagnostics ({'exit ' + str(res.rc) if res.rc is not None else res.failure()}) "
        f"saved to {paths['diagnostics']}")
    return res.as_dict()
