"""A deterministic stand-in tokenizer: BPE-like pieces (a word piece of ≤6 letters with its leading space,
≤3 digits, one symbol, or a whitespace run). About 3.5 characters per token on source code."""

from __future__ import annotations

import re
import zlib

PIECE = re.compile(r" ?[A-Za-z]{1,6}| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]|\s+")
VOCAB = 100_000
# SGLang applies the model's chat template; this one costs a fixed number of tokens around each message.
CHAT_OPEN = "<|im_start|>user\n"
CHAT_CLOSE = "<|im_end|>\n<|im_start|>assistant\n"


def count(text: str) -> int:
    return len(PIECE.findall(text))


def encode(text: str) -> list[int]:
    return [zlib.crc32(p.encode()) % VOCAB for p in PIECE.findall(text)]


TEMPLATE_TOKENS = 5  # <|im_start|> user \n ... <|im_end|> \n <|im_start|> assistant \n, as the template counts them


def chat_prompt_tokens(messages: list[dict]) -> int:
    """Tokens of a chat prompt: each message's content plus the template's fixed cost."""
    return sum(count(str(m.get("content") or "")) for m in messages) + TEMPLATE_TOKENS * max(1, len(messages))


WORDS = ("the", "model", "token", "draft", "tree", "verify", "accept", "batch", "step", "cache", "value",
         "return", "self", "data", "result", "index", "block", "budget", "node", "layer")


def word_for(i: int) -> str:
    return " " + WORDS[(i * 7 + 3) % len(WORDS)]
