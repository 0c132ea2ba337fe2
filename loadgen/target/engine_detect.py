"""Engine detection from `/metrics`, for servers whose info routes are missing or hidden behind a proxy.

`discover` asks every adapter's own routes first (loadgen/engines/registry.py); when none answers, the metric
name prefixes the adapters declare tell (`EngineAdapter.metric_prefix`). `discover` then stores
`detected_by: /metrics` in the target's server info, so results say how the engine was recognised.
"""

from __future__ import annotations

import aiohttp

from loadgen.engines import registry


def engine_from_metrics(text: str) -> str | None:
    """The name of the engine whose metric prefix starts the first sample line that has one; None otherwise."""
    found = registry.engine_from_metrics(text)
    return found.name if found else None


async def detect_from_metrics(session: aiohttp.ClientSession, url: str) -> str | None:
    """The engine's name from the metric names at `<url>/metrics`; None when it does not answer or names none."""
    try:
        async with session.get(url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
        return None
    return engine_from_metrics(text)
