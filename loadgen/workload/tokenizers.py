"""The server's own token count of a prompt, asked the way each engine wants it.

Each engine's tokenize routes, and the style each is asked in, are its adapter's (`EngineAdapter.tokenize`,
loadgen/engines/); here the styles are spoken (`TokenizeStyle`):

- SGLang `/v1/tokenize` and vLLM `/tokenize` take `{model, prompt}` (a list of prompts on SGLang) and answer
  `count` (vLLM and SGLang also `max_model_len`): found by `discover`, counted by its `TokenCounter`.
- llama.cpp's `/tokenize` takes `{content, add_special}` and answers `{tokens: [...]}` (given `{prompt}` it
  answers `{tokens: []}`, which must not be read as a count of 0). Its chat requests are counted whole by
  `/v1/chat/completions/input_tokens` (the request as the server will see it: template, special tokens and
  all), or, on builds without it, by `/apply-template` (the rendered prompt) and `/tokenize`.

A counter that counts the whole request (`whole_request`) is exact at every prompt length: the chat
template's tokens are not assumed to add up with the message's (a tokenizer may merge the message's last
characters with the template's next ones). Otherwise the prompt builder subtracts the template's cost,
measured once by a 1-token probe (`loadgen.run.setup`). Without any of these endpoints, prompt lengths are
estimated, and the run says so (`sizing_note`).
"""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from loadgen.engines.base import EngineAdapter, TokenizeStyle
from loadgen.engines.registry import count_routes, route_of, tokens_routes
from loadgen.errors import ServerError
from loadgen.names import Api
from loadgen.target.discover import Target, TokenCounter

PARALLEL = 8  # llama.cpp counts one text per request; a few at a time keep sizing short without crowding it
HELLO = "hello world"
TIMEOUT = aiohttp.ClientTimeout(total=30)


class TokensCounter:
    """Counts of a `{content} → {tokens}` route (llama.cpp's `/tokenize`): the text (with the BOS token when
    `add_special`, as the completions route sends it), or, for chat, the whole request (`chat_path`: an
    input-tokens route, or a template route whose rendering is then counted)."""

    def __init__(self, session: aiohttp.ClientSession, target: Target, engine: EngineAdapter, tokens_path: str,
                 chat_path: str | None = None, add_special: bool = True):
        self.session = session
        self.target = target
        self.engine = engine
        self.tokens_path = tokens_path
        self.chat_path = chat_path
        self.template = chat_path is not None and chat_path == route_of(engine, TokenizeStyle.TEMPLATE)
        self.add_special = add_special
        self.whole_request = chat_path is not None or (target.api is not Api.OPENAI_CHAT and add_special)
        self._gate = asyncio.Semaphore(PARALLEL)

    @property
    def name(self) -> str:
        if self.template:
            return f"{self.engine.title} {self.chat_path} + {self.tokens_path}"
        return f"{self.engine.title} {self.chat_path or self.tokens_path}"

    async def post(self, path: str, body: dict) -> dict:
        async with self._gate, self.session.post(self.target.url + path, json=body, timeout=TIMEOUT) as resp:
            raw = await resp.read()
            if resp.status != 200:
                raise ServerError(f"{path} answered {resp.status} while sizing prompts")
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ServerError(f"{path} answered something that is not JSON while sizing prompts") from None
        if not isinstance(obj, dict):
            raise ServerError(f"{path} answered {raw[:80]!r} while sizing prompts")
        return obj

    async def tokens(self, text: str, add_special: bool) -> int:
        return len((await self.post(self.tokens_path, {"content": text, "add_special": add_special}))["tokens"])

    async def one(self, text: str) -> int:
        if self.chat_path is None:
            return await self.tokens(text, self.add_special)
        messages = [{"role": "user", "content": text}]  # as client.api.build_body sends a prompt
        if self.template:
            rendered = (await self.post(self.chat_path, {"messages": messages}))["prompt"]
            return await self.tokens(rendered, True)
        return int((await self.post(self.chat_path, {"model": self.target.model, "messages": messages}))
                   ["input_tokens"])

    async def __call__(self, texts: list[str]) -> list[int]:
        return list(await asyncio.gather(*(self.one(t) for t in texts)))

    async def template_tokens(self, text: str) -> int | None:
        """The chat template's own tokens around `text` (whole request − the text alone); None off chat."""
        if self.chat_path is None:
            return None
        return await self.one(text) - await self.tokens(text, False)


async def _answers(session: aiohttp.ClientSession, url: str, body: dict) -> dict | None:
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            obj = orjson.loads(await resp.read())
    except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


async def _chat_path(session: aiohttp.ClientSession, target: Target, engine: EngineAdapter) -> str | None:
    """The engine's route that counts a whole chat request (input tokens), else the one that renders it."""
    messages = [{"role": "user", "content": HELLO}]
    path = route_of(engine, TokenizeStyle.INPUT_TOKENS)
    got = await _answers(session, target.url + path, {"model": target.model, "messages": messages}) if path else None
    if got and isinstance(got.get("input_tokens"), int):
        return path
    path = route_of(engine, TokenizeStyle.TEMPLATE)
    got = await _answers(session, target.url + path, {"messages": messages}) if path else None
    return path if got and isinstance(got.get("prompt"), str) else None


async def _tokens_route(session: aiohttp.ClientSession, target: Target) -> tuple[EngineAdapter, str] | None:
    """The first `{content} → {tokens}` route that counts a text (an empty list is no count)."""
    for engine, path in tokens_routes():
        got = await _answers(session, target.url + path, {"content": HELLO})
        if got and isinstance(got.get("tokens"), list) and got["tokens"]:
            return engine, path
    return None


async def find_tokenizer(session: aiohttp.ClientSession, target: Target, whole_request: bool = True):
    """The server's counter for this run's prompts, or None when it has no tokenize route an adapter names.

    `whole_request`: count a chat request whole where the server can (prompt sizing); off, count the text
    alone (for texts that are not sent as the whole request, e.g. reference answers)."""
    if target.tokenize_path:
        return TokenCounter(session, target)
    found = await _tokens_route(session, target)
    if found is None:
        return None
    engine, path = found
    if not whole_request:
        return TokensCounter(session, target, engine, path, add_special=False)
    chat = target.api is Api.OPENAI_CHAT
    chat_path = await _chat_path(session, target, engine) if chat else None
    if chat and chat_path is None:
        return TokensCounter(session, target, engine, path, add_special=False)  # the probe measures the template
    return TokensCounter(session, target, engine, path, chat_path=chat_path,
                         add_special=target.api is not Api.SGLANG_GENERATE)


def _known_routes() -> str:
    counted = ", ".join(f"{path} {{prompt}}" for path in count_routes()) + " with a count"
    return ", ".join([counted, *(f"{e.title} {path} {{content}}" for e, path in tokens_routes())])


def sizing_description(counter, overhead_tokens: int, template_tokens: int | None) -> dict:
    """How prompt lengths were made, for the results file: exact (by which endpoint) or estimated."""
    if counter is None:
        return {"exact": False, "estimated": True,
                "why": f"the server has no tokenize endpoint loadgen knows ({_known_routes()})"}
    name = getattr(counter, "name", f"{counter.target.tokenize_path} (count)")
    whole = bool(getattr(counter, "whole_request", False))
    if template_tokens is None and not (whole and counter.target.api is not Api.OPENAI_CHAT):
        template_tokens = overhead_tokens  # measured by the probe: the template's (and BOS's) cost
    return {"exact": True, "estimated": False, "counted_by": name, "whole_request": whole,
            "template_tokens": template_tokens}


def sizing_note(desc: dict) -> str:
    """The console line about prompt lengths: a warning when they are estimated."""
    if "counted_by" not in desc and not desc.get("estimated"):  # a dataset: rows are sent as they are
        return (f"prompts: {desc.get('method')}, template overhead {desc.get('template_overhead_tokens')} "
                "tokens")
    if desc.get("estimated"):
        return (f"warning: prompt lengths are estimated from a probe's characters per token: {desc['why']}; "
                "achieved prompt tokens are in each cell (prompt_tokens_mean)")
    how = "the whole request" if desc.get("whole_request") else "the text, plus the template's cost"
    template = ("no chat template" if desc.get("template_tokens") is None
                else f"chat template {desc['template_tokens']} tokens")
    return f"prompts: exact, counted by {desc['counted_by']} ({how}); {template}"
