"""llama.cpp's llama-server: recognising it, and what it says about its configuration.

Recognised by any of: the `Server: llama.cpp` response header, `owned_by: "llamacpp"` in `/v1/models`, or a
`/props` answer with `build_info` and `default_generation_settings` (the shape no other engine serves).
Its server info is assembled from what it serves and what it was launched with:
- `/v1/models` `meta` (n_ctx per slot, n_ctx_train, vocabulary, parameter count, file type);
- `/props`: build, model path and alias, parallel slots (`total_slots`), the chat template;
- `/slots`: whether the slots speculate (`speculative`);
- the command line of the local process (launch_args.py): draft model, draft n_max/n_min/p_min, spec type.
Only settings are kept, never per-start values (the media marker, `is_sleeping`, slot state, timestamps), so
the fingerprint of one configuration is the same after a restart and differs when a draft setting does; how they
were learnt (HOW_KNOWN) is stored but not fingerprinted.
"""

from __future__ import annotations

import aiohttp
import orjson

from loadgen.names import Engine
from loadgen.target.launch_args import local_llamacpp_settings

SERVER_HEADER = "llama.cpp"
PROPS_KEPT = ("build_info", "model_path", "model_alias", "model_ftype", "chat_template")
# how the settings were learnt, not what they are: left out of the fingerprint (a proxy may hide the header)
HOW_KNOWN = ("recognised_by", "settings_from", "draft_settings_unknown")


def recognised_by(models: dict | None, server_header: str | None) -> list[str]:
    """Which of llama-server's marks a `/v1/models` answer carries (empty: not llama.cpp by these)."""
    marks = []
    if server_header and server_header.strip().lower().startswith(SERVER_HEADER):
        marks.append("Server header")
    entries = (models or {}).get("data") if isinstance(models, dict) else None
    if any(isinstance(m, dict) and m.get("owned_by") == Engine.LLAMACPP for m in entries or []):
        marks.append("owned_by")
    return marks


def is_props(props) -> bool:
    return isinstance(props, dict) and "build_info" in props and "default_generation_settings" in props


def model_meta(models: dict | None, model: str) -> dict:
    """The `meta` object of `model` in a llama-server `/v1/models` answer ({} when absent)."""
    for m in (models or {}).get("data", []) if isinstance(models, dict) else []:
        if isinstance(m, dict) and m.get("id") == model and isinstance(m.get("meta"), dict):
            return m["meta"]
    return {}


def context_per_slot(meta: dict, props: dict | None) -> int | None:
    """Tokens one request may hold: `/v1/models` meta.n_ctx, else `/props` default_generation_settings.n_ctx."""
    n_ctx = meta.get("n_ctx")
    if not n_ctx and isinstance(props, dict):
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
    return int(n_ctx) if isinstance(n_ctx, int | float) and n_ctx > 0 else None


def _slot_settings(slots) -> dict:
    if not isinstance(slots, list) or not slots:
        return {}
    # a slot's `params` (with its speculative types) exist only once it has served a task: not a setting
    return {"speculative": any(bool(s.get("speculative")) for s in slots if isinstance(s, dict))}


def server_info(meta: dict, props: dict | None, slots, launch: dict | None, marks: list[str],
                launch_unknown: str | None = None) -> dict:
    """The settings of one llama-server, flat where a sweep's `expect` or a comparison reads them (pure).
    `launch_unknown` says why the launch settings (`launch`) could not be read."""
    props = props if isinstance(props, dict) else {}
    info: dict = {k: props[k] for k in PROPS_KEPT if props.get(k) not in (None, "")}
    sources = [name for name, there in (("/v1/models", meta), ("/props", props), ("/slots", slots)) if there]
    info.update(launch or {})  # what the server was started with; what it serves overrides below
    if launch is not None:
        sources.append("process command line")
    elif launch_unknown:
        info["draft_settings_unknown"] = launch_unknown
    if props.get("total_slots"):
        info["parallel_slots"] = int(props["total_slots"])
    context = context_per_slot(meta, props)
    if context:
        info["context_length"] = context
    if meta:
        info["model_meta"] = {k: v for k, v in meta.items() if k != "n_ctx"}
    info.update(_slot_settings(slots))
    info["recognised_by"] = marks
    info["settings_from"] = sources
    return info


async def _get(session: aiohttp.ClientSession, url: str, headers: dict | None = None, timeout_s: float = 10.0):
    """(parsed JSON of a 200 answer or None, the `Server` header or None); never raises for the server."""
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            raw = await resp.read()
            return (orjson.loads(raw) if resp.status == 200 and raw else None), resp.headers.get("Server")
    except (TimeoutError, aiohttp.ClientError, OSError, orjson.JSONDecodeError):
        return None, None


async def read_props(session: aiohttp.ClientSession, url: str, headers: dict | None = None) -> dict | None:
    props, _ = await _get(session, url + "/props", headers)
    return props if is_props(props) else None


async def llamacpp_server_info(session: aiohttp.ClientSession, url: str, models: dict | None, model: str,
                               marks: list[str], props: dict | None = None, headers: dict | None = None) -> dict:
    """server_info of the llama-server at `url` (reads /props unless given, /slots, the local command line)."""
    props = props if props is not None else await read_props(session, url, headers)
    slots, _ = await _get(session, url + "/slots", headers)
    launch, unknown = local_llamacpp_settings(url)
    return server_info(model_meta(models, model), props, slots, launch, marks, unknown)


async def llamacpp_identity(session: aiohttp.ClientSession, url: str, headers: dict | None = None) -> dict | None:
    """The server info of a llama-server at `url`, for an `expect` map where the server has no `/server_info`
    (readiness after a restart, the sweep's configuration check); None when it is not a llama-server."""
    models, server_header = await _get(session, url + "/v1/models", headers)
    marks, props = recognised_by(models, server_header), None
    if not marks:
        props = await read_props(session, url, headers)
        marks = ["/props"] if props else []
    if not marks:
        return None
    entries = models.get("data") if isinstance(models, dict) else None
    ids = [m.get("id") for m in entries if isinstance(m, dict)] if isinstance(entries, list) else []
    return await llamacpp_server_info(session, url, models, ids[0] if ids else "", marks, props, headers)
