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

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol
from urllib.parse import urlparse

import aiohttp

from loadgen.client.recorder import one_line
from loadgen.config import FaultsConfig
from loadgen.console import log
from loadgen.metrics.counts import scheduled
from loadgen.names import Outcome
from loadgen.names import ServerDownPolicy as OnServerDown
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import amended, build_cell
from loadgen.results.cell_result import CellResult
from loadgen.results.findings import NOTHING, CellFindings, incident
from loadgen.results.incidents import IncidentKind
from loadgen.run.control import RunControl
from loadgen.schedule.cell_run import LoadOutcome, StopToken
from loadgen.sinks.base import NullSink
from loadgen.target.discover import Target
from loadgen.target.readiness import wait_ready

POLICIES = tuple(OnServerDown)
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 2.0
CONNECT_CHECK_S = 2.0
WAIT_POLL_S = 0.2

class EarlyStop(Protocol):
    """Watches an attempt (it is also a sink) and may stop its load through the token; `reason` says why."""

    reason: str | None

    def arm(self, stop: StopToken, cell: CellKey, planned: int) -> None: ...


# (cell, attempt, the attempt's stop token) â the attempt's result and what its load did
Measure = Callable[[CellKey, int, StopToken], Awaitable[tuple[CellResult, LoadOutcome]]]


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
    """Watches every record (it is a sink) and paces closed-loop slots (`pause`, given to the driver); when
    the server is down, it stops the cell's load through the token it was armed with."""

    def __init__(self, url: str, threshold: int):
        self.url = url
        self.threshold = threshold
        self.consecutive = 0
        self.last_error: str | None = None
        self.down: str | None = None
        self.down_event = asyncio.Event()
        self.stop: StopToken | None = None
        self._check: asyncio.Task | None = None

    def arm(self, stop: StopToken | None = None) -> None:
        """Watch a new attempt at a cell, whose load stops through `stop`."""
        self.consecutive = 0
        self.down = None
        self.down_event = asyncio.Event()
        self.stop = stop

    def record(self, rec: Record) -> None:
        if rec.outcome == Outcome.CONNECTION_ERROR:
            self.consecutive += 1
            self.last_error = rec.error
            if self.consecutive % self.threshold == 0 and self.down is None and self._check is None:
                self._check = asyncio.get_running_loop().create_task(self._confirm())
        elif rec.outcome != Outcome.CANCELLED:
            self.consecutive = 0

    async def _confirm(self) -> None:
        try:
            if not await port_open(self.url):
                self.mark_down(f"{self.consecutive} consecutive connection errors, then a new connection to "
                               f"{self.url} failed; last error: {self.last_error}")
        finally:
            self._check = None

    def mark_down(self, reason: str) -> None:
        self.down = reason
        self.down_event.set()
        if self.stop is not None:
            self.stop.stop(reason)

    async def pause(self, rec: Record) -> None:
        if rec.outcome == Outcome.CONNECTION_ERROR and self.down is None:
            try:
                await asyncio.wait_for(self.down_event.wait(), backoff_s(self.consecutive))
            except TimeoutError:
                pass

    async def settle(self) -> None:
        """Let a reachability check still running decide before the cell is judged."""
        if self._check is not None:
            await asyncio.wait([self._check])


class ServerDownPolicy:
    """Measures a cell, judges each attempt and applies `--on-server-down`."""

    def __init__(self, faults: FaultsConfig, guard: ServerGuard, control: RunControl, timed_cells: bool,
                 early_stops: Sequence[EarlyStop] = ()):
        self.early_stops = early_stops  # they may stop an attempt early, with their reason (a search's probe)
        self.policy = faults.on_server_down
        self.wait_timeout_s = faults.server_wait_timeout_s
        self.attempts = faults.cell_attempts
        self.guard = guard
        self.control = control
        self.timed_cells = timed_cells  # --duration-per-cell: a cell plans no number of requests

    async def run_cell(self, session: aiohttp.ClientSession, cell: CellKey, measure: Measure, planned: int,
                       target: Target, headers: dict) -> CellResult:
        history: list[dict] = []
        for attempt in range(self.attempts):
            result = await self._attempt(cell, measure, attempt, planned)
            if self.guard.down is None:
                break
            result = amended(result, incident(IncidentKind.SERVER_DOWN, f"the server went away: {self.guard.down}"))
            log(f"{cell.label()}: the server went away (attempt {attempt + 1}): {self.guard.down}")
            again, found = await self._after_down(session, cell, target, headers)
            result = amended(result, found)
            if not again or attempt + 1 == self.attempts:
                break
            history.append(_brief(result, attempt))
        return amended(result, CellFindings(load={"attempts": history})) if history else result

    async def _after_down(self, session, cell: CellKey, target: Target, headers: dict) -> tuple[bool, CellFindings]:
        """Apply the policy to a cell whose server went away: whether the cell is to be measured again, and
        what the wait found (`_wait`)."""
        if self.policy == OnServerDown.STOP:
            self.control.stop(f"not measured: the server went away during {cell.label()} (--on-server-down stop)")
            return False, NOTHING
        if self.policy == OnServerDown.SKIP:
            log(f"{cell.label()}: failed; going on to the next cell (--on-server-down skip)")
            return False, NOTHING
        return await self._wait(session, target, headers)

    async def _attempt(self, cell: CellKey, measure: Measure, attempt: int, planned: int) -> CellResult:
        stop = StopToken(self.control.token)  # this attempt's load stops with the run, or when the server is down
        self.guard.arm(stop)
        for early in self.early_stops if not self.timed_cells else ():
            early.arm(stop, cell, planned)
        outcome: LoadOutcome | None = None
        try:
            result, outcome = await measure(cell, attempt, stop)
        except (aiohttp.ClientConnectionError, OSError, TimeoutError) as exc:
            # preparing the cell talks to the server (tokenizing prompts): it may already be gone
            if await port_open(self.guard.url):
                raise
            why = one_line(f"{type(exc).__name__}: {exc}")
            self.guard.mark_down(f"unreachable while preparing the cell ({why})")
            result = build_cell(cell, [])
        await self.guard.settle()
        return amended(result, CellFindings(load={"attempt": attempt}) + self._account(result, planned, outcome))

    def _account(self, result: CellResult, planned: int, outcome: LoadOutcome | None) -> CellFindings:
        """requests_not_sent, and an incident when an interrupt stopped the cell before it sent all it planned."""
        if self.timed_cells:
            return CellFindings(requests={"requests_not_sent": None})
        if outcome is None:  # the cell ended while it was being prepared
            return CellFindings(requests={"requests_not_sent": planned})
        not_sent = outcome.measured_not_sent
        found = CellFindings(requests={"requests_not_sent": not_sent})
        if not not_sent or self.guard.down is not None:
            return found
        of = f"{not_sent} of {not_sent + scheduled(result.requests.requests)} measured requests not sent"
        early = next((e.reason for e in self.early_stops if e.reason), None)
        if early and not self.control.stopping:
            return found + incident(IncidentKind.OVERSATURATED, f"{early}: {of}")
        why = self.control.stop_reason.removeprefix('not measured: ')
        return found + incident(IncidentKind.INTERRUPTED, f"stopped early ({why}): {of}")

    async def _wait(self, session, target: Target, headers: dict) -> tuple[bool, CellFindings]:
        """Wait for the server to come back (the readiness gate of sweeps): False when the run must stop, and
        the wait's `recovery` (with an incident when the server did not come back)."""
        log(f"waiting up to {self.wait_timeout_s:g} s for the server to come back (--on-server-down wait)")
        task = asyncio.ensure_future(wait_ready(
            session, self.guard.url, api=target.api, model=target.model, timeout_s=self.wait_timeout_s,
            poll_s=1.0, successes=2, expect=target.spec_settings() or None, saw_down=True,
            progress=_StateLog(), headers=headers))
        while not task.done():
            await asyncio.wait([task], timeout=WAIT_POLL_S)
            if self.control.stopping and not task.done():  # interrupted while waiting
                task.cancel()
                await asyncio.wait([task])
                return False, NOTHING
        ready = task.result()
        found = CellFindings(load={"recovery": {"ready": ready.ready, "elapsed_s": ready.elapsed_s,
                                                "reason": ready.reason}})
        if not ready.ready:
            self.control.stop("not measured: the server went away and did not come back "
                              f"within --server-wait-timeout {self.wait_timeout_s:g} s")
            return False, found + incident(IncidentKind.SERVER_DOWN, f"it did not come back: {ready.reason}")
        log(f"the server is back: {ready.reason}")
        return True, found


class _StateLog:
    """Readiness progress: one line each time the gate's state changes."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, elapsed_s: float, state: str) -> None:
        if state != self.last:
            self.last = state
            log(f"  {elapsed_s:6.1f} s  {state}")


def _brief(result: CellResult, attempt: int) -> dict:
    req = result.requests.requests
    return {"attempt": attempt, "status": result.status, "error": result.error,
            "requests": {k: req.get(k) for k in ("ok", "failed", "cancelled", "by_outcome") if k in req},
            "requests_not_sent": result.requests.requests_not_sent,
            "recovery": result.load.recovery}
