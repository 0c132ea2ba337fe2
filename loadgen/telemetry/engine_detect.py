"""Engine detection from `/metrics`, for servers whose info endpoints are missing or hidden behind a proxy.

`loadgen.target` asks `/server_info` (SGLang) and `/version` (vLLM) first; when neither answers, the metric
name prefixes tell: `sglang:` → SGLang, `vllm:` → vLLM. What was found is stored in the target's server info
under `detected_by` so results say how the engine was recognised.
"""

from __future__ import annotations

import aiohttp

PREFIXES = (("sglang:", "sglang"), ("vllm:", "vllm"))


def engine_from_metrics(text: str) -> str | None:
    """'sglang' or 'vllm' from the first sample line whose name has an engine prefix; None otherwise."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        for prefix, engine in PREFIXES:
            if line.startswith(prefix):
                return engine
    return None


async def detect_from_metrics(session: aiohttp.ClientSession, target) -> None:
    """Set `target.engine` from `<url>/metrics` when the info endpoints left it generic."""
    if target.engine != "openai":
        return
    try:
        async with session.get(target.url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return
            text = await resp.text()
    except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
        return
    engine = engine_from_metrics(text)
    if engine:
        target.engine = engine
        target.server_info = {**target.server_info, "detected_by": "/metrics"}
