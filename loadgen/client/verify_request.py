"""A verification request (`--verify`): its body, and its unary answer read into a `VerifyOutput`.

Verification requests are unary (not streamed: what matters is the whole output, not its timing), greedy
(temperature 0), with a fixed `max_tokens` and the model's own stop (no `ignore_eos`: a model made to run past
its end of sequence writes what it would never write, and a stop is part of the answer). They ask for the
tokens where the API can return them: OpenAI routes with `logprobs` (chat: `choices[0].logprobs.content[].token`,
and `id` where llama.cpp adds it; completions: `choices[0].logprobs.tokens`), SGLang's `/generate` answers
with `output_ids`. Where neither comes back, the output is its text alone (`TokenUnit.TEXT`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass

import aiohttp
import orjson

from loadgen.client.api import PATHS, RequestOptions, build_body
from loadgen.client.recorder import CANCELLED, http_error, one_line
from loadgen.engines.sglang import GENERATE_META
from loadgen.names import Api, Outcome, TokenUnit
from loadgen.record import Record

STOP_REASONS = frozenset({"stop", "eos", "eos_token", "stop_sequence", "end_turn", "abort_eos"})


@dataclass(frozen=True)
class VerifyOutput:
    """One output as the server gave it: text, its tokens (ids or token strings; None when the server gave
    neither), what they are, the server's completion count and its finish reason."""

    text: str
    tokens: list | None
    unit: TokenUnit
    completion_tokens: int | None
    finish_reason: str | None

    @property
    def stopped(self) -> bool:
        """The server says the model ended the output itself (an end-of-sequence or stop string)."""
        return (self.finish_reason or "").lower() in STOP_REASONS

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> VerifyOutput:
        return cls(str(d.get("text") or ""), d.get("tokens"), TokenUnit(d.get("unit", TokenUnit.TEXT)),
                   d.get("completion_tokens"), d.get("finish_reason"))


def verify_body(api: Api, prompt: str, model: str, max_tokens: int) -> dict:
    """The unary, greedy body of one verification prompt, asking for the output's tokens."""
    opts = RequestOptions(model=model, max_tokens=max_tokens, temperature=0.0, ignore_eos=False,
                          spec_details=False)
    body = build_body(api, prompt, opts, stream=False)
    if api is Api.OPENAI_CHAT:
        body["logprobs"] = True
    elif api is Api.OPENAI_COMPLETIONS:
        body["logprobs"] = 1
    return body


def read_output(api: Api, raw: bytes) -> VerifyOutput:
    """The output of a unary answer's bytes. Invalid UTF-8 is kept as replacement characters (U+FFFD), so
    that it is judged rather than lost; a body that is not the API's answer raises ValueError."""
    obj = orjson.loads(raw.decode("utf-8", "replace"))
    if not isinstance(obj, dict):
        raise ValueError("the answer is not a JSON object")
    if api is Api.SGLANG_GENERATE:
        return _generate_output(obj)
    choices = obj.get("choices")
    if not choices or not isinstance(choices[0], dict):
        raise ValueError(f"the answer has no choices: {raw[:120]!r}")
    choice = choices[0]
    usage = obj.get("usage") or {}
    if api is Api.OPENAI_CHAT:
        text = str((choice.get("message") or {}).get("content") or "")
    else:
        text = str(choice.get("text") or "")
    tokens, unit = _logprob_tokens(choice.get("logprobs"))
    return VerifyOutput(text, tokens, unit, usage.get("completion_tokens"), _reason(choice.get("finish_reason")))


def _generate_output(obj: dict) -> VerifyOutput:
    meta = obj.get(GENERATE_META)
    if not isinstance(meta, dict):
        raise ValueError(f"the answer has no {GENERATE_META}")
    ids = obj.get("output_ids")
    tokens, unit = (list(ids), TokenUnit.IDS) if ids else (None, TokenUnit.TEXT)
    return VerifyOutput(str(obj.get("text") or ""), tokens, unit, meta.get("completion_tokens"),
                        _reason(meta.get("finish_reason")))


def _logprob_tokens(logprobs) -> tuple[list | None, TokenUnit]:
    """Token ids (llama.cpp's `id`) or token strings from an OpenAI choice's logprobs; (None, TEXT) without."""
    if not isinstance(logprobs, dict):
        return None, TokenUnit.TEXT
    content = logprobs.get("content")
    if isinstance(content, list) and content:
        if all(isinstance(c, dict) and isinstance(c.get("id"), int) for c in content):
            return [c["id"] for c in content], TokenUnit.IDS
        return [str(c.get("token", "")) for c in content if isinstance(c, dict)], TokenUnit.LOGPROBS
    tokens = logprobs.get("tokens")
    if isinstance(tokens, list) and tokens:
        return [str(t) for t in tokens], TokenUnit.LOGPROBS
    return None, TokenUnit.TEXT


def _reason(finish) -> str | None:
    """A finish reason as a word: OpenAI's string, SGLang's `{"type": "stop", …}`."""
    if isinstance(finish, dict):
        finish = finish.get("type")
    return str(finish) if finish else None


async def post_verify(session: aiohttp.ClientSession, base_url: str, api: Api, body: dict,
                      rec: Record) -> VerifyOutput | None:
    """Send one verification body and read its answer: the output, or None when the request failed (its
    outcome and error are in `rec`, which gets its send and end times, status and the server's counts)."""
    rec.t_sent_ns = time.monotonic_ns()
    try:
        headers = {"Content-Type": "application/json"}
        if rec.request_id:
            headers["X-Request-Id"] = rec.request_id
        async with session.post(base_url + PATHS[api], data=orjson.dumps(body), headers=headers) as resp:
            raw = await resp.read()
            rec.status = resp.status
    except asyncio.CancelledError:
        rec.t_end_ns, rec.outcome, rec.error = time.monotonic_ns(), Outcome.CANCELLED, CANCELLED
        raise
    except TimeoutError:
        rec.t_end_ns, rec.outcome, rec.error = time.monotonic_ns(), Outcome.TIMEOUT, "verification request timed out"
        return None
    except (aiohttp.ClientError, OSError) as exc:
        rec.t_end_ns, rec.outcome, rec.error = time.monotonic_ns(), Outcome.CONNECTION_ERROR, one_line(str(exc))
        return None
    rec.t_end_ns = time.monotonic_ns()
    if rec.status != 200:
        rec.outcome, rec.error = Outcome.HTTP_ERROR, http_error(rec.status, raw)
        return None
    try:
        out = read_output(api, raw)
    except ValueError as exc:
        rec.outcome, rec.error = Outcome.PROTOCOL_ERROR, one_line(f"verification answer: {exc}")
        return None
    rec.completion_tokens = out.completion_tokens
    return out
