"""How the measured requests travel: the lean HTTP/1.1 pool (`--http-client h1`, default) or aiohttp.

A transport gives the cell its sender (`await sender(body, rec)`), prepares each cell before its clocks
start, opens the connections a load needs right before it, and closes what it opened when the run ends.
Both senders fill records through the same stream recorder (`loadgen.client`).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp

from loadgen.client.aiohttp_sender import make_session, send
from loadgen.client.cancel import CancellingSender
from loadgen.client.config import CONNECT_TIMEOUT_S, ClientConfig
from loadgen.client.h1 import Pool
from loadgen.client.h1_sender import Sender, settle_gc
from loadgen.client.tls import ssl_context
from loadgen.config import CancelConfig
from loadgen.record import CellKey
from loadgen.schedule.cell_run import SendFn
from loadgen.workload.corpus import seeded_rng

MAX_WARM_CONNECTIONS = 1024


class Transport(Protocol):
    def sender(self, session: aiohttp.ClientSession) -> SendFn: ...

    async def before_cell(self, session: aiohttp.ClientSession, cell: CellKey, n_jobs: int) -> None: ...

    async def warm(self, connections: int) -> None: ...

    async def close(self) -> None: ...


class H1Transport:
    """One lean pool per run, warmed to the cell's concurrency right before its load."""

    def __init__(self, ccfg: ClientConfig):
        self.ccfg = ccfg
        self._pool: Pool | None = None

    def pool(self) -> Pool:
        if self._pool is None:
            self._pool = Pool(self.ccfg.base_url, connect_timeout_s=CONNECT_TIMEOUT_S,
                              ssl_context=ssl_context(self.ccfg.base_url, self.ccfg.tls))
        return self._pool

    def sender(self, session: aiohttp.ClientSession | None) -> SendFn:
        return Sender(self.pool(), self.ccfg)  # its own pool: the session is not used (a worker has none)

    async def before_cell(self, session: aiohttp.ClientSession, cell: CellKey, n_jobs: int) -> None:
        # the pool is warmed in `warm`, right before the load; what this step does is settle the garbage
        # collector before the cell's clocks start
        settle_gc()

    async def warm(self, connections: int) -> None:
        await self.pool().warm(min(max(connections, 1), MAX_WARM_CONNECTIONS))

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


class AiohttpTransport:
    """aiohttp's session (the run's), with its keep-alive connections opened before each cell, and a session
    of new connections for the retry of a request whose reused connection the server had closed."""

    def __init__(self, ccfg: ClientConfig):
        self.ccfg = ccfg
        self._fresh: aiohttp.ClientSession | None = None

    def sender(self, session: aiohttp.ClientSession) -> SendFn:
        ccfg = self.ccfg
        if self._fresh is None:
            self._fresh = make_session(ccfg, fresh_connections=True)
        fresh = self._fresh
        return lambda body, rec: send(session, ccfg, body, rec, fresh)

    async def before_cell(self, session: aiohttp.ClientSession, cell: CellKey, n_jobs: int) -> None:
        await warm_connections(session, self.ccfg.base_url, cell.concurrency or n_jobs)

    async def warm(self, connections: int) -> None:
        pass

    async def close(self) -> None:
        if self._fresh is not None:
            await self._fresh.close()


async def warm_connections(session: aiohttp.ClientSession, url: str, n: int) -> None:
    """Open `n` keep-alive connections before the cell, so no measured request pays for a TCP handshake
    (production clients keep connections open; a cold connect would be charged to the first wave's TTFT)."""
    async def one() -> None:
        try:
            async with session.get(url + "/v1/models") as resp:
                await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError):
            pass  # a server that is down shows up in the cell's records, not here

    await asyncio.gather(*(one() for _ in range(min(n, MAX_WARM_CONNECTIONS))))


class CancellingTransport:
    """Another transport whose sender closes a share of the measured requests on purpose
    (`client.cancel.CancellingSender`, `--cancel-fraction`); everything else is the inner transport's."""

    def __init__(self, inner: Transport, cancel: CancelConfig, seed: int):
        self.inner = inner
        self.cancel = cancel
        self.phase = seeded_rng(seed, "cancel").random()

    def sender(self, session: aiohttp.ClientSession) -> SendFn:
        c = self.cancel
        return CancellingSender(self.inner.sender(session), c.cancel_fraction, self.phase, c.cancel_after_s,
                                c.cancel_after_tokens)

    async def before_cell(self, session: aiohttp.ClientSession, cell: CellKey, n_jobs: int) -> None:
        await self.inner.before_cell(session, cell, n_jobs)

    async def warm(self, connections: int) -> None:
        await self.inner.warm(connections)

    async def close(self) -> None:
        await self.inner.close()
