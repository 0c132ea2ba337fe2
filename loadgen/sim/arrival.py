"""Arrival times stamped when a request's first bytes reach the server, not when its handler task runs.

In a burst of C requests an asyncio server runs handlers one after another; a stamp taken inside the
handler would include the parsing of every request ahead of it, and the truth's TTFT would read short.
The protocol's `data_received` runs as soon as the socket is readable, so the stamp is taken there.
"""

from __future__ import annotations

import time
from collections import deque
from typing import cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler


class StampingRequestHandler(RequestHandler):
    """Stamps each request when the bytes that complete its headers arrive (body bytes stamp nothing).
    A `closer` (`loadgen.sim.connections`) sees every read first and may drop it."""

    closer = None

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        if self.closer is not None and self.closer.intercept(self, data, now):
            return
        before = self._request_count
        super().data_received(data)
        new = self._request_count - before
        if new:
            if not hasattr(self, "arrivals"):
                self.arrivals: deque[int] = deque()
            self.arrivals.extend([now] * new)


class StampingServer(web.Server):
    closer = None

    def __call__(self) -> RequestHandler:
        handler = StampingRequestHandler(self, loop=self._loop, **self._kwargs)
        handler.closer = self.closer
        return handler


def stamp_arrivals(runner: web.AppRunner, closer=None) -> None:
    """Call after `runner.setup()` and before the sites start."""
    server = runner.server
    assert server is not None, "stamp_arrivals runs after runner.setup()"
    server.__class__ = StampingServer
    cast(StampingServer, server).closer = closer


def take_arrival(request: web.Request) -> int:
    """The arrival stamp of this request (requests on one connection are handled in order)."""
    arrivals = getattr(request.protocol, "arrivals", None)
    return arrivals.popleft() if arrivals else time.monotonic_ns()
