"""The three wire APIs: each one's path and request body (reading its streamed events: `loadgen.client.stream`)."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.names import Api

APIS = tuple(Api)  # what --api and a sweep file's `api` are checked against

PATHS = {
    Api.OPENAI_CHAT: "/v1/chat/completions",
    Api.OPENAI_COMPLETIONS: "/v1/completions",
    Api.SGLANG_GENERATE: "/generate",
}


@dataclass(frozen=True)
class RequestOptions:
    model: str
    max_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = True
    spec_details: bool = True  # ask SGLang for per-request speculative details (ignored by other servers)


def build_body(api: Api, prompt: str | list[dict], opts: RequestOptions, stream: bool = True) -> dict:
    """The JSON body for one request. `prompt` is text, or chat messages for openai-chat."""
    match api:
        case Api.SGLANG_GENERATE:
            return {
                "text": prompt,
                "sampling_params": {
                    "max_new_tokens": opts.max_tokens,
                    "temperature": opts.temperature,
                    "ignore_eos": opts.ignore_eos,
                },
                "stream": stream,
            }
        case Api.OPENAI_CHAT:
            messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
            return _openai_body(opts, stream) | {"messages": messages}
        case _:
            return _openai_body(opts, stream) | {"prompt": prompt}


def _openai_body(opts: RequestOptions, stream: bool) -> dict:
    body: dict = {
        "model": opts.model,
        "max_tokens": opts.max_tokens,
        "temperature": opts.temperature,
        "stream": stream,
    }
    if opts.ignore_eos:
        body["ignore_eos"] = True
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if opts.spec_details:
        body["return_spec_tokens_details"] = True
    return body
