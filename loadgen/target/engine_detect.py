"""Engine detection from `/metrics`, for servers whose info endpoints are missing or hidden behind a proxy.

`discover` asks `/server_info` (SGLang) and `/version` (vLLM) first; when neither answers, the metric
name prefixes tell: `sglang:` → SGLang, `vllm:` → vLLM, `llamacpp:` → llama.cpp. `discover` then stores `detected_by: /metrics` in the
target's server info, so results say how the engine was recognised.
"""

from __future__ import annotations

import aiohttp

from loadgen.names import Engine

PREFIXES = tuple((f"{engine}:", engine) for engine in Engine)  # sglang:, vllm:, llamacpp:


def engine_from_metrics(text: str) -> Engine | None:
    """'sglang', 'vllm' or 'llamacpp' from the first sample line whose name has an engine prefix; None otherwise."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        for prefix, engine in PREFIXES:
            if line.startswith(prefix):
                return engine
    return None


async def detect_from_metrics(session: aiohttp.ClientSession, url: str) -> Engine | None:
    """'sglang', 'vllm' or 'llamacpp' from the metric names at `<url>/metrics`; None when it does not answer or names none."""
    try:
        async with session.get(url + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
        return None
    return engine_from_metrics(text)
