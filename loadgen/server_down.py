"""The server going away in the middle of a run: notice it, mark the cell failed with the reason, then stop,
wait for the server and measure the cell again, or skip to the next cell (`--on-server-down`).

Detection: `--server-down-after N` consecutive connection errors (refused, reset, closed mid-stream), then a
fresh TCP connection to the target's port that fails. The second step tells a dead server from a few
connections reset by a proxy. Either way, after every connection error a closed-loop slot backs off for
min(0.05 s × 2^(k−1), 2 s), where k counts the consecutive errors, so a run never hammers a refused port
at full speed.

Policies:
- stop (default): the cell is failed; the cells after it are recorded as skipped; results are written; exit 1.
- wait: the cell is failed; `readiness.wait_ready` waits for the server to come back (same speculative
  settings, health 200, real generations succeed) for at most `--server-wait-timeout` seconds, then the cell
  is measured again from the start, up to `--cell-attempts` times. Records of every attempt stay in the
  JSONL (`attempt` 0, 1, …); the results keep the last attempt, with the earlier ones under `attempts`.
  A server that does not come back in time ends the run as `stop` does.
- skip: the cell is failed; the run goes on to the next cell.

Every cell entry also gets `requests_not_sent`: measured requests that were never sent because the cell
stopped early (server down or interrupt), so planned = requests.ok + requests.failed + requests_not_sent
(None for a cell measured for a duration, which plans no number of requests).
"""

from __future__ import annotations

import argparse
import asyncio
from urllib.parse import urlparse

import aiohttp

from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
from loadgen.client import one_line
from loadgen.errors import UsageError
from loadgen.record import CellKey, Record
from loadgen.sinks.base import NullSink
from loadgen.summary import summarize

POLICIES = ("stop", "wait", "skip")
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 2.0
CONNECT_CHECK_S = 2.0


def backoff_s(consecutive: int) -> float:
    """Pause after the k-th consecutive connection error: min(0.05 × 2^(k−1), 2) seconds (0 when k = 0)."""
    if consecutive <= 0:
        return 0.0
    return min(BACKOFF_FIRST_S * 2 ** min(consecutive - 1, 16), BACKOFF_MAX_S)


async def port_open(url: str, timeout_s: float = CONNECT_CHECK_S) -> bool:
    """Whether a new TCP connection to the URL's host and port succeeds."""
    u = urlparse(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(u.hostname, port), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


class ServerGuard(NullSink):
    """Watches every record (it is a sink) and paces closed-loop slots (it is the runner's `pause`)."""

    def __init__(self, runner, threshold: int):
        self.runner = runner
        self.threshold = threshold
        self.consecutive = 0
        self.last_error: str | None = None
        self.down: str | None = None
        self.down_event = asyncio.Event()
        self._check: asyncio.Task | None = None

    def arm(self) -> None:
        self.consecutive = 0
        self.down = None
        self.down_event = asyncio.Event()

    def record(self, rec: Record) -> None:
        if rec.outcome == "connection_error":
            self.consecutive += 1
            self.last_error = rec.error
            if self.consecutive % self.threshold == 0 and self.down is None and self._check is None:
                self._check = asyncio.get_running_loop().create_task(self._confirm())
        elif rec.outcome != "cancelled":
            self.consecutive = 0

    async def _confirm(self) -> None:
        try:
            if not await port_open(self.runner.url):
                self.mark_down(f"{self.consecutive} consecutive connection errors, then a new connection to "
                               f"{self.runner.url} failed; last error: {self.last_error}")
        finally:
            self._check = None

    def mark_down(self, reason: str) -> None:
        self.down = reason
        self.down_event.set()
        if self.runner.current is not None:
            self.runner.current.stopping = True

    async def pause(self, rec: Record) -> None:
        if rec.outcome == "connection_error" and self.down is None:
            try:
                await asyncio.wait_for(self.down_event.wait(), backoff_s(self.consecutive))
            except TimeoutError:
                pass

    async def settle(self) -> None:
        """Let a reachability check still running decide before the cell is judged."""
        if self._check is not None:
            await asyncio.wait([self._check])


class ServerDownPolicy:
    """Wraps `Runner.run_cell`: judges each attempt of a cell and applies the policy."""

    def __init__(self, runner, policy: str, threshold: int, wait_timeout_s: float, attempts: int):
        self.runner = runner
        self.policy = policy
        self.wait_timeout_s = wait_timeout_s
        self.attempts = attempts
        self.guard = ServerGuard(runner, threshold)
        self._run_cell = runner.run_cell
        runner.run_cell = self.run_cell
        runner.sinks.append(self.guard)
        runner.pause = self.guard.pause

    async def run_cell(self, session: aiohttp.ClientSession, cell: CellKey, factories) -> dict:
        history: list[dict] = []
        for attempt in range(self.attempts):
            entry = await self._attempt(session, cell, factories, attempt)
            if self.guard.down is None:
                break
            entry["status"] = "failed"
            entry["error"] = f"the server went away: {self.guard.down}"
            _log(f"{cell.label()}: the server went away (attempt {attempt + 1}): {self.guard.down}")
            if self.policy == "stop":
                self._stop(f"not measured: the server went away during {cell.label()} (--on-server-down stop)")
                break
            if self.policy == "skip":
                _log(f"{cell.label()}: failed; going on to the next cell (--on-server-down skip)")
                break
            if not await self._wait(session, entry) or attempt + 1 == self.attempts:
                break
            history.append(_brief(entry, attempt))
        if history:
            entry["attempts"] = history
        return entry

    async def _attempt(self, session, cell: CellKey, factories, attempt: int) -> dict:
        self.guard.arm()
        self.runner.current = None
        try:
            entry = await self._run_cell(session, cell, factories, attempt=attempt)
        except (aiohttp.ClientConnectionError, OSError, TimeoutError) as exc:
            # preparing the cell talks to the server (tokenizing prompts): it may already be gone
            if await port_open(self.runner.url):
                raise
            why = one_line(f"{type(exc).__name__}: {exc}")
            self.guard.mark_down(f"unreachable while preparing the cell ({why})")
            entry = self.runner.assemble(cell, summarize([]) | {"client": None}, [])
        await self.guard.settle()
        entry["attempt"] = attempt
        self._account(cell, entry)
        return entry

    def _account(self, cell: CellKey, entry: dict) -> None:
        """requests_not_sent, and a warning when the cell stopped before sending all it planned."""
        run = self.runner.current
        if self.runner.cfg.duration_per_cell_s:  # a timed cell plans no number of requests
            entry["requests_not_sent"] = None
            return
        if run is None:  # the cell ended while it was being prepared
            entry["requests_not_sent"] = self.runner.requests_for(cell)
            return
        not_sent = sum(1 for job in run.jobs[run.next_job:] if job.phase == "measure")
        entry["requests_not_sent"] = not_sent
        if not_sent and self.guard.down is None:
            entry.setdefault("warnings", []).append(
                f"stopped early ({self.runner.stop_reason.removeprefix('not measured: ')}): "
                f"{not_sent} of {not_sent + entry['requests']['ok'] + entry['requests']['failed']} "
                "measured requests not sent")

    async def _wait(self, session, entry: dict) -> bool:
        """Wait for the server to come back (the readiness gate of sweeps); False when the run must stop."""
        from loadgen.readiness import wait_ready

        runner = self.runner
        _log(f"waiting up to {self.wait_timeout_s:g} s for the server to come back (--on-server-down wait)")
        last = [None]

        def progress(elapsed_s: float, state: str) -> None:
            if state != last[0]:
                last[0] = state
                _log(f"  {elapsed_s:6.1f} s  {state}")

        task = asyncio.ensure_future(wait_ready(
            session, runner.url, api=runner.cfg.api, model=runner.target.model, timeout_s=self.wait_timeout_s,
            poll_s=1.0, successes=2, expect=runner.target.spec_settings() or None, saw_down=True,
            progress=progress, headers=runner.headers))
        while not task.done():
            await asyncio.wait([task], timeout=0.2)
            if runner.stopping and not task.done():  # interrupted while waiting
                task.cancel()
                await asyncio.wait([task])
                return False
        ready = task.result()
        entry["recovery"] = {"ready": ready.ready, "elapsed_s": ready.elapsed_s, "reason": ready.reason}
        if not ready.ready:
            entry["error"] += f"; it did not come back: {ready.reason}"
            self._stop("not measured: the server went away and did not come back "
                       f"within --server-wait-timeout {self.wait_timeout_s:g} s")
            return False
        _log(f"the server is back: {ready.reason}")
        return True

    def _stop(self, reason: str) -> None:
        self.runner.stopping = True
        self.runner.stop_reason = reason


def _brief(entry: dict, attempt: int) -> dict:
    req = entry.get("requests") or {}
    return {"attempt": attempt, "status": entry["status"], "error": entry["error"],
            "requests": {k: req.get(k) for k in ("ok", "failed", "by_outcome")},
            "requests_not_sent": entry.get("requests_not_sent"),
            "recovery": entry.get("recovery")}


def _log(msg: str) -> None:
    from loadgen.runner import log
    log(msg)


# ---- command line ------------------------------------------------------------------------------------------
def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server going away (see docs/faults.md)")
    g.add_argument("--on-server-down", default="stop", metavar="stop|wait|skip",
                   help="when the server goes away mid-cell: stop the run (default), wait for it to come back and "
                        "measure the cell again, or skip to the next cell; the cell is failed in every case")
    g.add_argument("--server-down-after", type=int, default=3, metavar="N",
                   help="consecutive connection errors before checking whether the server is gone (default 3)")
    g.add_argument("--server-wait-timeout", type=float, default=600.0, metavar="S",
                   help="with --on-server-down wait: seconds to wait for the server to come back (default 600)")
    g.add_argument("--cell-attempts", type=int, default=3, metavar="N",
                   help="with --on-server-down wait: measure a cell at most N times (default 3)")


def configure(a: argparse.Namespace, cfg) -> None:
    if a.on_server_down not in POLICIES:
        raise UsageError(f"--on-server-down {a.on_server_down!r} is unknown; choose one of {', '.join(POLICIES)}")
    if a.server_down_after < 1:
        raise UsageError(f"--server-down-after {a.server_down_after} must be ≥ 1, e.g. 3")
    if not a.server_wait_timeout > 0:
        raise UsageError(f"--server-wait-timeout {a.server_wait_timeout:g} must be > 0 seconds, e.g. 600")
    if a.cell_attempts < 1:
        raise UsageError(f"--cell-attempts {a.cell_attempts} must be ≥ 1, e.g. 3")
    cfg.extras.update(on_server_down=a.on_server_down, server_down_after=a.server_down_after,
                      server_wait_timeout_s=a.server_wait_timeout, cell_attempts=a.cell_attempts)


def install(runner) -> None:
    x = runner.cfg.extras
    ServerDownPolicy(runner, x.get("on_server_down", "stop"), x.get("server_down_after", 3),
                     x.get("server_wait_timeout_s", 600.0), x.get("cell_attempts", 3))


OPTION_GROUPS.append(add_options)
CONFIGURERS.append(configure)
RUNNER_HOOKS.append(install)
