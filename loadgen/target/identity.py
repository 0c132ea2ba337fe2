"""A server's settings for a sweep's `expect` map where it has no settings route of its own (llama-server):
the first adapter whose `identity` recognises the server gives them (how an engine's settings are assembled is
its adapter's, loadgen/engines/).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from loadgen.engines.registry import ADAPTERS
from loadgen.target.probe import HttpProbe, first_model


async def server_identity(session: aiohttp.ClientSession, url: str, headers: dict | None = None) -> dict | None:
    """The server info of the server at `url` by the first adapter that recognises it without a settings route
    (readiness after a restart, the sweep's configuration check); None when none does."""
    models, server_header = await _models(session, url, headers)
    probe = HttpProbe(session, url, models, server_header, first_model(models), headers)
    for adapter in ADAPTERS:
        info = await adapter.identity(probe)
        if info is not None:
            return info
    return None


async def _models(session: aiohttp.ClientSession, url: str, headers: dict | None) -> tuple[Any, str | None]:
    """(the parsed JSON of a 200 `/v1/models` answer or None, its `Server` header); (None, None) on failure."""
    try:
        async with session.get(url + "/v1/models", headers=headers, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            raw = await resp.read()
            return (orjson.loads(raw) if resp.status == 200 and raw else None), resp.headers.get("Server")
    except (TimeoutError, aiohttp.ClientError, OSError, orjson.JSONDecodeError):
        return None, None

