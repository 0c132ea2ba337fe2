"""Serving one registry's /metrics from the running event loop (aiohttp), on a socket bound up front."""

from __future__ import annotations

import socket

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler


class MetricsServer:
    """`await start()` binds host:port (port 0 = a free one) and returns the bound port, or raises OSError;
    `await stop()` closes the socket."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int):
        self.registry = registry
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(self.registry))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        info = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(info[4])
        except OSError:
            sock.close()
            await self.stop()
            raise
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
