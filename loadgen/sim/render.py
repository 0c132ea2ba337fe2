"""Wire format of the simulator's answers (SGLang's shapes, see shared/samples)."""

from __future__ import annotations

import time

import orjson

from loadgen.sim.outputs import text_of


def text_for(req, start: int, k: int) -> str:
    """The text of output tokens start..start+k-1 of `req` (a SimRequest)."""
    return text_of(req.tokens(start, k))


def token_logprobs(tokens: list[int], chat: bool) -> dict:
    """An OpenAI choice's `logprobs` for these tokens (each certain: greedy decoding of a fixed model)."""
    words = [text_of([t]) for t in tokens]
    if chat:
        return {"content": [{"token": w, "logprob": 0.0, "bytes": list(w.encode()), "top_logprobs": []}
                            for w in words]}
    return {"tokens": words, "token_logprobs": [0.0] * len(words), "top_logprobs": None, "text_offset": None}


def sse(obj: dict | str) -> bytes:
    if isinstance(obj, str):
        return b"data: " + obj.encode() + b"\n\n"
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class OpenAIChunks:
    """Builds the chunk objects of one OpenAI streaming response (chat or completions)."""

    def __init__(self, rid: str, model: str, chat: bool, continuous_usage: bool, prompt_tokens: int | None):
        self.rid = rid
        self.model = model
        self.chat = chat
        self.continuous = continuous_usage
        self.prompt_tokens = prompt_tokens
        self.cached_tokens: int | None = None  # reported when the server has a prefix cache (--cache-report)
        self.reasoning_budget = 0  # an answer's first tokens that are reasoning (--reasoning-tokens, chat only)
        self.created = int(time.time())
        self.object = "chat.completion.chunk" if chat else "text_completion"

    def _base(self, choices: list) -> dict:
        return {"id": self.rid, "object": self.object, "created": self.created, "model": self.model,
                "choices": choices}

    def role(self) -> dict:
        return self._base([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None, "matched_stop": None}])

    def content(self, text: str, completion_tokens: int, finish: str | None = None, reasoning: bool = False) -> dict:
        if self.chat:
            delta = {"reasoning_content": text} if reasoning else {"content": text}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                      "matched_stop": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        obj = self._base([choice])
        if self.continuous:
            obj["usage"] = self.usage(completion_tokens)
        return obj

    def spec(self, details: dict) -> dict:
        obj = self._base([])
        obj["sglext"] = {"spec_tokens_details": details}
        return obj

    def final_usage(self, completion_tokens: int) -> dict:
        obj = self._base([])
        obj["usage"] = self.usage(completion_tokens)
        return obj

    def usage(self, completion_tokens: int) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": (self.prompt_tokens or 0) + completion_tokens,
                "prompt_tokens_details": None if self.cached_tokens is None else {"cached_tokens": self.cached_tokens},
                "reasoning_tokens": min(self.reasoning_budget, completion_tokens),
                **({"completion_tokens_details": {"reasoning_tokens": min(self.reasoning_budget, completion_tokens)}}
                   if self.reasoning_budget else {})}


def spec_details(completion_tokens: int, verify_ct: int, budget: int, correct_drafts: list[int] | None = None) -> dict:
    """SGLang's per-request speculative details: accept length = completion_tokens / verify_ct; with
    `correct_drafts`, its `spec_correct_drafts_histogram` ([j] = verify steps that accepted j drafts)."""
    accept_length = completion_tokens / verify_ct if verify_ct else 0.0
    proposed = verify_ct * budget
    correct = max(0, completion_tokens - verify_ct - 1)
    return {"spec_accept_rate": correct / proposed if proposed else 0.0, "spec_accept_length": accept_length,
            "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed, "spec_verify_ct": verify_ct,
            **({"spec_correct_drafts_histogram": list(correct_drafts)} if correct_drafts is not None else {})}


def generate_event(rid: str, text: str, completion_tokens: int, prompt_tokens: int | None,
                   finish: dict | None = None, extra: dict | None = None, output_ids: list | None = None) -> dict:
    meta = {"id": rid, "finish_reason": finish, "prompt_tokens": prompt_tokens, "weight_version": "default",
            "completion_tokens": completion_tokens, "cached_tokens": 0}
    if extra:
        meta.update(extra)
    return {"text": text, "output_ids": output_ids or [], "meta_info": meta}
