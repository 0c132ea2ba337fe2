"""Servers that close keep-alive connections under the client: the simulator's connection flags.

- `--close-after-stream`: the connection is closed right after the final chunk of every streamed response,
  although every response announces `Keep-Alive: timeout=5, max=100` (llama.cpp's llama-server does this:
  its FIN follows the last chunk by ~0.04 ms; shared/samples/llamacpp-keepalive_probe.txt).
- `--idle-close S`: a keep-alive connection idle for S seconds after a response is closed (what proxies and
  load balancers do).
- `--close-lag S`: the server decides to close, stops serving the connection, and its FIN leaves S seconds
  later (0 by default: at once). A request that arrives on the connection in between is never answered: the
  client's race made certain, for tests. Each such request gets a truth row with outcome `dropped_by_close`
  (its `rid` read from the request's `X-Request-Id`), so a test can check the client's retries one by one.

`ConnectionCloser` is handed to `SimServer` (`on_response_prepare` and `after_response` from its app and
middleware) and to the arrival-stamping protocol (`intercept`, before each read is parsed).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from loadgen.sim.faults import GENERATION_PATHS, usage_exit

if TYPE_CHECKING:
    import argparse

KEEP_ALIVE = "timeout=5, max=100"  # what llama-server announces
REQUEST_ID = re.compile(rb"\r\nX-Request-Id:[ \t]*([^\r\n]*)", re.IGNORECASE)
REQUEST_LINE = re.compile(rb"^(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) (\S+) HTTP/1\.[01]\r\n")


@dataclass
class ConnectionConfig:
    close_after_stream: bool = False
    idle_close_s: float | None = None
    close_lag_s: float = 0.0

    def any(self) -> bool:
        return self.close_after_stream or self.idle_close_s is not None


class ConnectionCloser:
    def __init__(self, cfg: ConnectionConfig, truth):
        self.cfg = cfg
        self.truth = truth
        self.closing: dict[object, str] = {}  # protocol → why it is being closed
        self.idle_timers: dict[object, asyncio.TimerHandle] = {}
        self.dropped = 0

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.cfg.close_after_stream:
            response.headers["Keep-Alive"] = KEEP_ALIVE

    def after_response(self, request: web.Request, response: web.StreamResponse) -> None:
        """The handler has answered: a streamed answer (already complete) closes the connection under
        `--close-after-stream`; otherwise `--idle-close` starts counting the connection's idle time."""
        protocol = request.protocol
        if protocol is None:
            return
        streamed = not isinstance(response, web.Response)
        if self.cfg.close_after_stream and streamed:
            self.close(protocol, "close_after_stream")
        elif self.cfg.idle_close_s is not None:
            loop = asyncio.get_running_loop()
            self.idle_timers[protocol] = loop.call_later(self.cfg.idle_close_s, self.close, protocol, "idle_close")

    def close(self, protocol, why: str) -> None:
        """Stop serving the connection; its transport closes after `close_lag_s`."""
        self.idle_timers.pop(protocol, None)
        transport = protocol.transport
        if transport is None or transport.is_closing() or protocol in self.closing:
            return
        self.closing[protocol] = why
        asyncio.get_running_loop().call_later(self.cfg.close_lag_s, self._shut, protocol, transport)

    def _shut(self, protocol, transport) -> None:
        self.closing.pop(protocol, None)
        transport.close()

    def intercept(self, protocol, data: bytes, now_ns: int) -> bool:
        """Called with every read before it is parsed; True when the read is dropped (the connection is being
        closed; a request head in it gets its `dropped_by_close` truth row)."""
        timer = self.idle_timers.pop(protocol, None)
        if timer is not None:
            timer.cancel()
        why = self.closing.get(protocol)
        if why is None:
            return False
        line = REQUEST_LINE.match(data)
        if line is not None:
            self.dropped += 1
            rid = REQUEST_ID.search(data)
            path = line.group(2).decode("latin-1")
            self.truth.write({
                "rid": rid.group(1).decode("latin-1").strip() if rid else f"dropped-{self.dropped}",
                "api": GENERATION_PATHS.get(path), "path": path, "stream": None,
                "t_arrival_ns": now_ns, "t_end_ns": time.monotonic_ns(),
                "t_first_chunk_ns": None, "chunk_times_ns": [], "chunk_tokens": [], "prompt_tokens": None,
                "completion_tokens": 0, "verify_ct": 0, "outcome": "dropped_by_close", "faults": [why]})
        return True


def closer_from_args(a: argparse.Namespace, truth) -> ConnectionCloser | None:
    """The closer of the connection flags, or None without them; a bad value exits 2 with one line."""
    for flag, value in (("--idle-close", a.idle_close), ("--close-lag", a.close_lag)):
        if value is not None and value < 0:
            usage_exit(f"{flag} {value:g} must be ≥ 0")
    cfg = ConnectionConfig(close_after_stream=a.close_after_stream, idle_close_s=a.idle_close,
                           close_lag_s=a.close_lag)
    return ConnectionCloser(cfg, truth) if cfg.any() else None
