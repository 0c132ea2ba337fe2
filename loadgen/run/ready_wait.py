"""`--wait-ready`: before the first cell, wait for a server that is still starting, through the same readiness
gate as sweeps (`loadgen.target.readiness`): health 200, then K real 1-token generations.

A server that answers 503 while it loads, answers health while generation still fails (a stale process), or
refuses connections (not up yet, or restarting) is waited for, with a line at once and every few seconds
saying what it waits for and for how long; a refused connection says so in words ("connection refused:
nothing listens on 127.0.0.1:9") with the way out (`--wait-ready 0`), since a wrong port looks the same.
"Never answered" is not "was up, or is loading": under the default `--wait-ready` a port that has refused every
connection since the first try is given up after `NEVER_ANSWERED_S` (exit 2, naming `--wait-ready S`), while
any answer (503, health without generation, a timeout) waits the full time; a `--wait-ready` given on the
command line waits its full time for both. A host name that does not resolve is bad input: exit 2 at once.
A server still not ready
when the time is up ends the run (exit 2) before any load, with the gate's last state. A server that
answers but is no LLM server, or refuses the gate's generations with a 4xx (key, model), ends the wait at once:
discovery then names the problem; one that answers 200 with something that is no OpenAI answer (a web page,
a generation without events: `readiness.NOT_OPENAI`) is named here, exit 2. While a poll waits for an answer,
the line every few seconds says what for. A first Ctrl-C ends the wait like a run interrupted (exit 130).
`--wait-ready 0` skips the wait: the first request of discovery fails at once.
"""

from __future__ import annotations

import asyncio
import re
import socket
import textwrap
import time
from urllib.parse import urlsplit

import aiohttp

from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.run.control import RunControl
from loadgen.target.discover import not_openai
from loadgen.target.readiness import IN_FLIGHT, NOT_OPENAI, wait_ready

READY_GENERATIONS = 3
POLL_S = 1.0
PROGRESS_EVERY_S = 5.0
STOP_POLL_S = 0.1
REQUEST_TIMEOUT_S = 30.0
REFUSED_STATE = "connection refused"
NEVER_ANSWERED_S = 30.0  # the default --wait-ready gives up on a port refusing since the first try this soon
# a server restarting refuses connections too, so refused is waited for; but a wrong port is far likelier
REFUSED_HINT = " (a wrong port? --wait-ready 0 fails at once instead of waiting for a server that is starting)"
NEVER_HINT = (" (a wrong port? given up after {limit:g} s of refusals from the first try; --wait-ready S waits "
              "S s for a server that is starting, 0 fails at once)")
NOT_AN_LLM_SERVER = ("/v1/models answered 404", "/v1/models answered 405")
# a generation refused for what it asks (key, model, body): no wait mends that; discovery says what is wrong
REFUSED = re.compile(r"^generation \d+/\d+ failed \(http_error: HTTP 4(?!08|29)\d\d")


def nothing_to_wait_for(state: str) -> bool:
    """The gate's state is not one of a server that is starting: it answers, but is no LLM server (none of the
    health routes nor /v1/models), or refuses the generation itself with a 4xx (bad key, unknown model)."""
    return state in NOT_AN_LLM_SERVER or state.startswith(NOT_OPENAI) or REFUSED.match(state) is not None


async def check_resolves(url: str) -> None:
    """UsageError when the URL's host name does not resolve (a typo is not a server that is starting)."""
    parts = urlsplit(url)
    try:
        await asyncio.get_running_loop().getaddrinfo(parts.hostname, parts.port or 80, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--url {url}: the host name {parts.hostname!r} does not resolve ({exc.strerror}); "
                         "check the name") from None


class NeverAnswered:
    """Whether to give up on a port that never answered: every poll since the first refused the connection, for
    at least `limit_s` (None: never give up, `--wait-ready` was given). Any other state, once, means something
    is there (loading, stale, restarting) and the wait runs its full time."""

    def __init__(self, limit_s: float | None):
        self.limit_s = limit_s
        self.answered = False

    def give_up(self, elapsed_s: float, state: str) -> bool:
        self.answered = self.answered or not state.startswith(REFUSED_STATE)
        return self.limit_s is not None and not self.answered and elapsed_s >= self.limit_s


class WaitLines:
    """The gate's progress as log lines (wrapped at 120 columns): at the first poll, when the state changes, and
    every few seconds."""

    def __init__(self, url: str, timeout_s: float, never_answered_s: float | None = None):
        self.url, self.timeout_s = url, timeout_s
        self.hint = NEVER_HINT.format(limit=never_answered_s) if never_answered_s is not None else REFUSED_HINT
        self.last_state = ""
        self.last_line_s = -PROGRESS_EVERY_S
        self.lines = 0

    def __call__(self, elapsed_s: float, state: str) -> None:
        if state == "ready":
            if self.lines:
                log(f"{self.url} is ready after {elapsed_s:.1f} s")
            return
        if state != self.last_state or elapsed_s - self.last_line_s >= PROGRESS_EVERY_S:
            log(textwrap.fill(f"waiting for {self.url} to be ready: {elapsed_s:.0f} s of {self.timeout_s:g} s "
                              f"(--wait-ready): {state}{self.hint if state.startswith(REFUSED_STATE) else ''}",
                              120, subsequent_indent="    "))
            self.last_line_s = elapsed_s
            self.lines += 1
        self.last_state = state


class Watch:
    """The gate's progress callback: progress lines; the end of the wait when there is `nothing_to_wait_for`,
    or when the port `NeverAnswered` (`gave_up_s` says after how long)."""

    def __init__(self, lines: WaitLines, never: NeverAnswered):
        self.lines, self.never = lines, never
        self.gate: asyncio.Future | None = None
        self.gave_up_s: float | None = None
        self.stopped_by = ""  # the state that ended the wait, when it was `nothing_to_wait_for`

    def __call__(self, elapsed_s: float, state: str) -> None:
        assert self.gate is not None, "the gate is set before its first progress call"
        if state.startswith(IN_FLIGHT):  # a poll still waiting: no answer, so nothing to judge
            self.lines(elapsed_s, state)
        elif self.never.give_up(elapsed_s, state):
            self.gave_up_s = elapsed_s
            self.gate.cancel()
        elif nothing_to_wait_for(state):
            self.stopped_by = state
            self.gate.cancel()
        else:
            self.lines(elapsed_s, state)


class ReadyWait:
    """The run's wait for its server, before discovery and prompt sizing (a `Preflight` of the runner)."""

    def __init__(self, timeout_s: float, api: str, model: str | None, headers: dict, control: RunControl,
                 never_answered_s: float | None = None):
        self.timeout_s, self.api, self.model, self.headers = timeout_s, api, model, headers
        self.control = control
        self.never_answered_s = never_answered_s  # None: wait the full time for a refusing port too

    async def _outcome(self, gate: asyncio.Future):
        """The gate's result; None when it ended itself (`nothing_to_wait_for`); CancelledError on an
        interrupt, which the run's interrupt handler turns into exit 130."""
        try:
            while not gate.done():
                await asyncio.wait([gate], timeout=STOP_POLL_S)
                if self.control.stopping:
                    raise asyncio.CancelledError
        finally:
            if not gate.done():
                gate.cancel()
        return None if gate.cancelled() else gate.result()

    async def check(self, session: aiohttp.ClientSession, url: str) -> None:
        await check_resolves(url)
        if not self.timeout_s:
            return  # --wait-ready 0: discovery's own first request fails at once when the server is not up
        t0 = time.monotonic()
        limit_s = self.never_answered_s if self.never_answered_s is not None and \
            self.never_answered_s < self.timeout_s else None
        watch = Watch(WaitLines(url, self.timeout_s, limit_s), NeverAnswered(limit_s))
        watch.gate = gate = asyncio.ensure_future(wait_ready(
            session, url, self.api, self.model, timeout_s=self.timeout_s, poll_s=POLL_S,
            successes=READY_GENERATIONS, require_restart=False, headers=self.headers,
            progress=watch, request_timeout_s=REQUEST_TIMEOUT_S))
        res = await self._outcome(gate)
        if watch.gave_up_s is not None:
            raise UsageError(f"{url} refused connections for {watch.gave_up_s:.0f} s (wrong port?); "
                             "--wait-ready S waits longer for a starting server")
        if watch.stopped_by.startswith(NOT_OPENAI):
            raise not_openai(url, watch.stopped_by.removeprefix(NOT_OPENAI))
        if res is None:
            return  # nothing to wait for: discovery, next, says what the server is not or what it refused
        if not res.ready:
            state = res.reason.split("; last state: ")[-1]
            raise UsageError(f"{url} is not ready after {time.monotonic() - t0:.0f} s: {state}; check the server, "
                             "or give it longer with --wait-ready SECONDS")
