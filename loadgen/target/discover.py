"""Discovering what the target is: its model, engine, limits and fingerprint, before any load is sent."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field

import aiohttp
import orjson

from loadgen.client.api import PATHS, RequestOptions, build_body
from loadgen.client.recorder import one_line
from loadgen.console import log
from loadgen.engines import registry
from loadgen.engines.base import EngineAdapter
from loadgen.engines.sglang import GENERATE_META
from loadgen.errors import ERROR_ROOM, ServerError, UsageError
from loadgen.names import Api
from loadgen.redact import redact
from loadgen.target.engine_detect import detect_from_metrics
from loadgen.target.probe import HttpProbe
from loadgen.target.unreachable import down_state, refused

PROBE_TRIES = 3
PROBE_RETRY_S = 1.0



@dataclass
class Target:
    url: str
    api: Api
    model: str
    engine: str = registry.FALLBACK.name  # an adapter's name (loadgen/engines/), "openai" when none recognised it
    server_info: dict = field(default_factory=dict)
    max_model_len: int | None = None
    tokenize_path: str | None = None

    def __post_init__(self) -> None:
        self.api = Api(self.api)  # a caller may name it by its string

    @property
    def adapter(self) -> EngineAdapter:
        return registry.adapter(self.engine)

    def spec_settings(self) -> dict:
        return self.adapter.spec_settings(self.server_info)

    def fingerprint(self) -> str:
        """Hash of the server's configuration (server info without what changes between starts)."""
        stable = self.adapter.stable_info(self.server_info)
        return hashlib.sha256(orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def as_dict(self) -> dict:
        return {"url": self.url, "api": self.api, "engine": self.engine, "model": self.model,
                "server_info": self.server_info, "fingerprint": self.fingerprint(),
                "spec": self.spec_settings()}


async def get_json(session: aiohttp.ClientSession, url: str, timeout_s: float = 10.0):
    """(status, parsed JSON or None). Connection problems raise aiohttp errors."""
    status, body, _, _ = await get_json_server(session, url, timeout_s)
    return status, body


async def get_json_server(session: aiohttp.ClientSession, url: str, timeout_s: float = 10.0):
    """(status, parsed JSON or None, the `Server` response header or None, the content type)."""
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
        raw = await resp.read()
        try:
            parsed = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            parsed = None
        return resp.status, parsed, resp.headers.get("Server"), resp.content_type


def unauthorised(url: str, status: int, key_sent: bool, api_key_env: str, key_file: str | None) -> UsageError:
    """The one-line error for a 401/403: where the key is read from, and whether one was sent at all."""
    if not key_sent:
        return UsageError(f"{url} answered {status} (unauthorised) and no API key was sent: put the key in the "
                          f"environment variable {api_key_env} (or name another with --api-key-env, or use "
                          "--api-key-file)")
    source = f"the file {key_file} (--api-key-file)" if key_file else f"the environment variable {api_key_env}"
    return UsageError(f"{url} answered {status} (unauthorised) to the API key from {source}; check that it is "
                      "this server's key")


def not_openai(url: str, what: str) -> UsageError:
    """What answered at `url` is no OpenAI-compatible server (`what`: the answer that says so, a few words)."""
    return UsageError(f"{url} does not look like an OpenAI-compatible server ({what}); check --url")


def no_model(url: str, status: int) -> UsageError:
    """No model to measure: a server without /v1/models is not an OpenAI-compatible server at all."""
    if status in (404, 405):
        return not_openai(url, f"/v1/models: {status}")
    if status == 503:
        return UsageError(f"{url}/v1/models answered 503: the server is not ready (still loading?); wait for it "
                          "with --wait-ready SECONDS (0 gives up at once)")
    return UsageError(f"{url}/v1/models answered {status} with no model; pass --model NAME")


async def discover(session: aiohttp.ClientSession, url: str, api: Api, model: str | None,
                   api_key_env: str, key_file: str | None = None) -> Target:
    try:
        status, models, server_header, content_type = await get_json_server(session, url + "/v1/models")
    except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
        if refused(exc):
            raise UsageError(f"cannot reach {url}: {down_state(exc, url)}; check --url's port and that the "
                             "server is running") from None
        raise UsageError(f"cannot reach {url} ({one_line(f'{type(exc).__name__}: {exc}')}); check --url and "
                         "that the server is running") from None
    if status in (401, 403):
        raise unauthorised(url, status, "Authorization" in session.headers, api_key_env, key_file)
    if status == 200 and not isinstance(models, dict):  # a web server's page: no model list, --model or not
        raise not_openai(url, f"/v1/models: {'HTML' if 'html' in content_type else 'no JSON'}")
    listed = (models or {}).get("data", []) if status == 200 else []
    served = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
    if model is None:
        if not served:
            raise no_model(url, status)
        model = served[0]
    elif served and model not in served:
        raise UsageError(f"model {model!r} is not served by {url}; it serves: {', '.join(served)}")
    target = Target(url=url, api=api, model=model)
    for m in (models or {}).get("data", []):
        if isinstance(m, dict) and m.get("id") == model and m.get("max_model_len"):
            target.max_model_len = int(m["max_model_len"])
    await _detect_engine(session, target, models, server_header)
    await _detect_tokenize(session, target)
    target.server_info = redact(target.server_info, _sent_key(session))
    return target


def _sent_key(session: aiohttp.ClientSession) -> str | None:
    auth = session.headers.get("Authorization", "")
    return auth.removeprefix("Bearer ").strip() or None


async def _detect_engine(session: aiohttp.ClientSession, target: Target, models=None,
                         server_header: str | None = None) -> None:
    """The engine by the first adapter that recognises the server (registry order), else by its metric names."""
    found = await registry.detect(HttpProbe(session, target.url, models, server_header, target.model))
    if found is not None:
        adapter, detection = found
        target.engine = adapter.name
        target.server_info = detection.server_info
        target.max_model_len = target.max_model_len or detection.context_length
        return
    engine = await detect_from_metrics(session, target.url)  # no info route: metric name prefixes tell
    if engine:
        target.engine = engine
        target.server_info = {**target.server_info, "detected_by": "/metrics"}


async def _detect_tokenize(session: aiohttp.ClientSession, target: Target) -> None:
    for path in registry.count_routes():
        try:
            async with session.post(target.url + path, json={"prompt": "hello world", "model": target.model},
                                    timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status == 200:
                    body = orjson.loads(await resp.read())
                    if isinstance(body, dict) and "count" in body:
                        target.tokenize_path = path
                        if body.get("max_model_len") and not target.max_model_len:
                            target.max_model_len = int(body["max_model_len"])
                        return
        except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError):
            continue


class TokenCounter:
    """Counts tokens with the server's own tokenizer; batches when the server accepts a list."""

    def __init__(self, session: aiohttp.ClientSession, target: Target, batch: int = 256):
        self.session = session
        self.target = target
        self.batch = batch
        self.list_ok: bool | None = None

    async def _post(self, prompt):
        async with self.session.post(self.target.url + self.target.tokenize_path,
                                     json={"prompt": prompt, "model": self.target.model}) as resp:
            if resp.status != 200:
                raise ServerError(f"{self.target.tokenize_path} answered {resp.status} while sizing prompts")
            return orjson.loads(await resp.read())

    async def __call__(self, texts: list[str]) -> list[int]:
        out: list[int] = []
        for i in range(0, len(texts), self.batch):
            part = texts[i:i + self.batch]
            if self.list_ok is not False:
                body = await self._post(part)
                counts = body.get("count")
                if isinstance(counts, list) and len(counts) == len(part):
                    self.list_ok = True
                    out += [int(c) for c in counts]
                    continue
                self.list_ok = False
            out += await asyncio.gather(*(self._one(t) for t in part))
        return out

    async def _one(self, text: str) -> int:
        return int((await self._post(text))["count"])


def probe_failed(path: str, status: int | None, snippet: str) -> UsageError:
    """The probe's failure in one line within 120 columns: a long answer of the server goes on the line above."""
    what = f"HTTP {status}: {snippet}" if status else snippet
    hint = "check that the server can generate (e.g. /health_generate answers 200), then run again"
    line = f"a 1-token probe request to {path} failed ({what}); {hint}"
    if len(line) > ERROR_ROOM:
        log(f"the probe's answer: {what}")
        answer = f"HTTP {status}" if status else "no answer"
        line = f"a 1-token probe to {path}: {answer} (above); run again once it generates"
    return UsageError(line)


async def probe_prompt_tokens(session: aiohttp.ClientSession, target: Target, text: str,
                              headers: dict | None = None, tries: int = PROBE_TRIES,
                              api_key_env: str = "OPENAI_API_KEY", key_file: str | None = None) -> int:
    """usage.prompt_tokens the server reports for `text` sent through the run's API (1 output token).

    A 5xx or a dropped connection is tried again (`tries` in all, PROBE_RETRY_S apart): one overloaded
    moment must not end a run before it starts."""
    opts = RequestOptions(model=target.model, max_tokens=1, ignore_eos=False, spec_details=False)
    body = build_body(target.api, text, opts, stream=False)
    path = PATHS[target.api]
    for attempt in range(1, tries + 1):
        try:
            async with session.post(target.url + path, json=body, headers=headers) as resp:
                status, raw = resp.status, await resp.read()
        except (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            status, raw = None, one_line(f"{type(exc).__name__}: {exc}").encode()
        if status in (401, 403):
            raise unauthorised(target.url, status, "Authorization" in session.headers or bool(headers),
                               api_key_env, key_file)
        if status == 200 or (status is not None and status < 500) or attempt == tries:
            break
        await asyncio.sleep(PROBE_RETRY_S)
    snippet = one_line(raw.decode("utf-8", "replace"))
    if status != 200:
        raise probe_failed(path, status, snippet)
    counts = GENERATE_META if target.api is Api.SGLANG_GENERATE else "usage"  # where the answer counts tokens
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise not_openai(target.url, f"{path}: no JSON") from None
    try:
        return int(answer[counts]["prompt_tokens"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"the probe answer from {path} has no {counts}.prompt_tokens; is --api {target.api} "
                         "right?") from None
