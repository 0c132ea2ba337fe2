"""The server as the engine adapters see it during detection: GETs over HTTP, answered once each.

An adapter (loadgen/engines/) asks through this object and sends nothing itself; a route asked twice (two
adapters' steps, or a step and the server info it then assembles) is fetched once.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from loadgen.engines.base import LaunchFlags
from loadgen.target.launch_args import local_settings


class HttpProbe:
    """GETs of `url`'s routes with the run's session (and `headers`); never raises for the server."""

    def __init__(self, session: aiohttp.ClientSession, url: str, models: Any, server_header: str | None,
                 model: str, headers: dict | None = None, timeout_s: float = 10.0):
        self.session = session
        self.url = url
        self.models = models
        self.server_header = server_header
        self.model = model
        self.headers = headers
        self.timeout_s = timeout_s
        self._answers: dict[str, tuple[int | None, Any]] = {}

    async def get_json(self, path: str) -> tuple[int | None, Any]:
        if path not in self._answers:
            self._answers[path] = await self._get(path)
        return self._answers[path]

    async def _get(self, path: str) -> tuple[int | None, Any]:
        try:
            async with self.session.get(self.url + path, headers=self.headers,
                                        timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                raw = await resp.read()
                status = resp.status
        except (TimeoutError, aiohttp.ClientError, OSError):
            return None, None
        try:
            return status, orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return status, None

    async def get_text(self, path: str) -> str | None:
        """The text of a 200 answer to GET `path`; None otherwise."""
        try:
            async with self.session.get(self.url + path, headers=self.headers,
                                        timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                return await resp.text() if resp.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
            return None

    def local_launch(self, launch: LaunchFlags) -> tuple[dict[str, Any] | None, str | None]:
        return local_settings(self.url, launch)


def first_model(models: Any) -> str:
    """The id of the first model a `/v1/models` answer lists ("" when none)."""
    entries = models.get("data") if isinstance(models, dict) else None
    ids = [m.get("id") for m in entries if isinstance(m, dict)] if isinstance(entries, list) else []
    return str(ids[0]) if ids and ids[0] is not None else ""
