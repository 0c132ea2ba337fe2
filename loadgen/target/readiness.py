"""The readiness gate: is the server at `url` the one we mean to measure, and can it generate?

A server counts as ready only when all three hold, checked in this order on every poll:
  (a) identity: it was seen going away (connection refused/reset, or a non-200 health answer) since the gate
      started, or the `expect` map matches its `/server_info`. A health check alone cannot tell the old
      process from the new one: the old one may answer while the new one is still loading weights;
  (b) health: `/health_generate` answers 200 (else `/health`, else `/v1/models`, whichever the server has), and
      `/v1/models`, where it answers 200, answers JSON;
  (c) `successes` consecutive real 1-token generations through the run's API succeed.
A 200 that is no OpenAI answer (a web page for `/v1/models`, a generation answered without a single event) is a
state that starts with `NOT_OPENAI`: a web server that answers 200 to every path, which no wait will mend.
While a poll waits for an answer, `progress` hears `IN_FLIGHT` + what it waits for, each second once it has
waited `IN_FLIGHT_AFTER_S` (a server that accepts and never answers is said, not waited for in silence).
The `after` future (e.g. the reconfigure command) must also be done: polling, and so seeing the server go
down, starts at once, but nothing is declared ready while the reconfiguration is still running.

Reused by sweeps (after each reconfiguration) and by runs that wait for a crashed server to come back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import orjson

from loadgen.client.aiohttp_sender import send
from loadgen.client.api import RequestOptions, build_body
from loadgen.client.config import ClientConfig
from loadgen.engines.registry import identity_routes
from loadgen.names import Outcome, Phase
from loadgen.record import CellKey, Record
from loadgen.target.expect import expect_mismatches
from loadgen.target.identity import server_identity
from loadgen.target.unreachable import down_state

HEALTH_PATHS = ("/health_generate", "/health", "/v1/models")
NOT_OPENAI = "not an OpenAI answer: "
IN_FLIGHT = "no answer yet to "
IN_FLIGHT_AFTER_S = 5.0
TICK_S = 1.0
INFO_PATHS = identity_routes()  # the engines' routes whose answer is the server's settings
MAX_STATES = 64

Progress = Callable[[float, str], None]


@dataclass
class ReadyResult:
    """What the gate saw. `states` are the distinct states in order, as (seconds since start, text)."""

    ready: bool
    elapsed_s: float
    reason: str
    saw_down: bool = False
    expect_ok: bool | None = None  # None: no expect map was given
    health_path: str | None = None
    model: str | None = None
    server_info: dict | None = None
    generations_ok: int = 0
    generations_failed: int = 0
    last_error: str | None = None
    states: list[tuple[float, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "server_info"}
        d["states"] = [{"t_s": round(t, 3), "state": s} for t, s in self.states]
        return d


class _Gate:
    def __init__(self, session, url, api, model, successes, expect, headers, request_timeout_s):
        self.session = session
        self.url = url.rstrip("/")
        self.api = api
        self.model = model
        self.successes = successes
        self.expect = expect or {}
        self.headers = headers or {}
        self.request_timeout_s = request_timeout_s
        self.res = ReadyResult(ready=False, elapsed_s=0.0, reason="")
        self.step = ""  # what the poll waits for now

    async def _get(self, path: str, timeout_s: float, content_type: list[str] | None = None):
        self.step = f"GET {path}"
        async with self.session.get(self.url + path, headers=self.headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if content_type is not None:
                content_type.append(resp.content_type)
            return resp.status, await resp.read()

    async def _first_answer(self, paths: tuple[str, ...], timeout_s: float):
        """(path, status, body) of the first of `paths` that does not answer 404/405 (else the last one's);
        a connection failure instead marks the server seen down and returns that state's text."""
        for path in paths:
            try:
                status, body = await self._get(path, timeout_s)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                self.res.saw_down = True
                return down_state(exc, self.url)
            if status not in (404, 405):
                break
        return path, status, body

    async def health(self, timeout_s: float) -> str | None:
        """None when healthy; else the state text. Marks `saw_down` on anything but 200 or 404/405."""
        got = await self._first_answer(HEALTH_PATHS, timeout_s)
        if isinstance(got, str):
            return got
        path, status, body = got
        if status == 200:
            self.res.health_path = path
            return None
        if status not in (404, 405):
            self.res.saw_down = True
        return f"{path} answered {status}"

    async def models(self, timeout_s: float) -> str | None:
        """None unless `/v1/models` answers 200 with something other than a JSON object (`NOT_OPENAI`); its first
        model becomes the generations' when none was named. No answer is the generations' to judge."""
        content_type: list[str] = []
        try:
            status, body = await self._get("/v1/models", timeout_s, content_type)
        except (TimeoutError, aiohttp.ClientError, OSError):
            return None
        if status != 200:
            return None
        if not isinstance(_json(body), dict):
            what = "HTML" if "html" in content_type[0] else "no JSON"
            return f"{NOT_OPENAI}/v1/models: {what}"
        self.model = self.model or _first_model(body)
        return None

    async def identity(self, timeout_s: float) -> str | None:
        """None when condition (a) holds; else why not."""
        if not self.expect:
            return None if self.res.saw_down else "up, but not yet seen restarting (and no expect map)"
        got = await self._first_answer(INFO_PATHS, timeout_s)
        if isinstance(got, str):
            return got
        _, status, body = got
        info = _json(body) if status == 200 else None
        if not isinstance(info, dict):  # an engine without a settings route (llama-server): its adapter's view
            info = await server_identity(self.session, self.url, self.headers)
        if not isinstance(info, dict):
            self.res.expect_ok = False
            return "no /server_info to check the expect map against"
        self.res.server_info = info
        wrong = expect_mismatches(info, self.expect)
        self.res.expect_ok = not wrong
        return None if not wrong else "up, but expect does not match: " + "; ".join(wrong)

    async def generations(self, timeout_s: float) -> str | None:
        """Run up to `successes` 1-token generations back to back; None when all succeeded."""
        self.res.model = self.model
        ccfg = ClientConfig(base_url=self.url, api=self.api, timeout_s=timeout_s, idle_timeout_s=timeout_s)
        opts = RequestOptions(model=self.model or "", max_tokens=1, ignore_eos=False, spec_details=False)
        for i in range(self.successes):
            prompt = f"Readiness probe {uuid.uuid4().hex}. Reply with one word."
            rec = Record(run_id="readiness", cell=CellKey(0, 1), seq=i, phase=Phase.WARMUP,
                         request_id=f"readiness-{uuid.uuid4().hex[:12]}", t_intended_ns=time.monotonic_ns())
            self.step = "a 1-token generation"
            await send(self.session, ccfg, build_body(self.api, prompt, opts), rec)
            if rec.ok and (rec.completion_tokens or 0) >= 1:
                self.res.generations_ok += 1
                continue
            self.res.generations_failed += 1
            self.res.last_error = f"{rec.outcome}: {rec.error or 'no tokens'}"
            if no_events(rec):
                return f"{NOT_OPENAI}no SSE answer"
            return f"generation {i + 1}/{self.successes} failed ({self.res.last_error})"
        return None


def no_events(rec: Record) -> bool:
    """A generation answered 200 with a body that held no event a stream parser could take (a web page, a
    JSON answer to a streaming request): no server that is starting answers so. A body that ended before its
    first byte, or an error event, is not this."""
    return (rec.status == 200 and rec.outcome is Outcome.PROTOCOL_ERROR and not rec.chunks
            and rec.t_first_byte_ns is not None and not (rec.error or "").startswith("server error"))


async def wait_ready(session: aiohttp.ClientSession, url: str, api: str = "openai-chat",
                     model: str | None = None, timeout_s: float = 600.0, poll_s: float = 2.0,
                     successes: int = 3,
                     expect: dict | None = None, saw_down: bool = False, require_restart: bool = True,
                     after: asyncio.Future | None = None, progress: Progress | None = None,
                     headers: dict | None = None, request_timeout_s: float = 30.0) -> ReadyResult:
    """Poll `url` every `poll_s` until it is ready (module docstring) or `timeout_s` has passed.

    `saw_down=True` says the caller already saw the server go away; `require_restart=False` drops
    condition (a) (e.g. waiting for a crashed server to come back). `expect` maps dotted `/server_info` keys
    to expected values. `progress(elapsed_s, state)` is called after every poll. Never raises for server
    behaviour: the result says what happened.
    """
    gate = _Gate(session, url, api, model, successes, expect, headers, request_timeout_s)
    res = gate.res
    res.saw_down = saw_down
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    while True:
        left = deadline - time.monotonic()
        state = await _polled(gate, _poll(gate, require_restart, after, max(min(request_timeout_s, left), 0.5)),
                              t0, progress)
        res.elapsed_s = time.monotonic() - t0
        if state is None:
            res.ready = True
            res.reason = (f"ready after {res.elapsed_s:.1f} s: "
                          + ("expect matched" if res.expect_ok else "seen restarting" if res.saw_down
                             else "health") + f", {res.health_path} 200, {successes} generations ok")
            _note(res, res.elapsed_s, "ready")
            if progress:
                progress(res.elapsed_s, "ready")
            return res
        _note(res, res.elapsed_s, state)
        if progress:
            progress(res.elapsed_s, state)
        left = deadline - time.monotonic()
        if left <= 0:
            res.reason = f"not ready after {timeout_s:g} s; last state: {state}"
            return res
        await asyncio.sleep(min(poll_s, left))


async def _polled(gate: _Gate, poll, t0: float, progress: Progress | None) -> str | None:
    """The poll's state; while it has waited `IN_FLIGHT_AFTER_S` or more, `progress` hears what for, each
    `TICK_S`."""
    task = asyncio.ensure_future(poll)
    started = time.monotonic()
    try:
        while not task.done():
            await asyncio.wait([task], timeout=TICK_S)
            now = time.monotonic()
            if not task.done() and progress and now - started >= IN_FLIGHT_AFTER_S:
                progress(now - t0, IN_FLIGHT + gate.step)
        return task.result()
    finally:
        task.cancel()


async def _poll(gate: _Gate, require_restart: bool, after, timeout_s: float) -> str | None:
    state = await gate.health(timeout_s) or await gate.models(timeout_s)
    if state is not None:
        return state
    if require_restart:
        state = await gate.identity(timeout_s)
        if state is not None:
            return state
    if after is not None and not after.done():
        return "up, waiting for the reconfiguration to finish"
    return await gate.generations(timeout_s)


def _note(res: ReadyResult, t_s: float, state: str) -> None:
    if (not res.states or res.states[-1][1] != state) and len(res.states) < MAX_STATES:
        res.states.append((t_s, state))


def _json(body: bytes):
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


def _first_model(body: bytes) -> str | None:
    obj = _json(body)
    data = obj.get("data") if isinstance(obj, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0].get("id")
    return None
