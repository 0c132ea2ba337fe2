"""The verification prompts (`--verify`): built in, or one per line of `--verify-prompts FILE` (a JSONL line's
`prompt` or `text`, or a plain line of text). The same prompts, in the same order, go to every cell and every
configuration; they are sent as they are (no unique tag), so a prefix cache may serve them.
"""

from __future__ import annotations

import hashlib

import orjson

from loadgen.errors import UsageError
from loadgen.files import read_input

HINT = "give a text or JSONL file of prompts"

BUILT_IN = (
    "Explain in plain words what a hash table is and why lookups in it are fast on average.",
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "List the planets of the solar system in order from the Sun, one per line, with one fact each.",
    "Translate into French: The train leaves at seven in the morning and arrives before noon.",
    "Summarise the causes of the French Revolution in five short bullet points.",
    "What is the derivative of x^3 * sin(x)? Show each step of the product rule.",
    "Write a short SQL query that returns the ten customers with the highest total order value.",
    "Describe how speculative decoding speeds up language model inference without changing its output.",
)


def load_prompts(path: str | None) -> list[str]:
    """The prompts of `path` (None: the built-in ones). An unreadable or empty file is a UsageError."""
    if path is None:
        return list(BUILT_IN)
    raw = read_input(path, HINT, "--verify-prompts")
    try:
        lines = [line.strip() for line in raw.decode("utf-8").splitlines()]
    except UnicodeDecodeError:
        raise UsageError(f"--verify-prompts {path}: not UTF-8 text; {HINT}") from None
    prompts = [p for p in (_prompt(line) for line in lines if line) if p]
    if not prompts:
        raise UsageError(f"--verify-prompts {path}: holds no prompt; give one prompt per line (text, or JSONL "
                         "with a 'prompt' or 'text' field)")
    return prompts


def _prompt(line: str) -> str:
    if not line.startswith("{"):
        return line
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    return str(row.get("prompt") or row.get("text") or "") if isinstance(row, dict) else line


def prompts_digest(prompts: list[str]) -> str:
    """A short digest of the prompts in order: a saved reference is used only for the same prompts."""
    return hashlib.sha256(orjson.dumps(prompts)).hexdigest()[:16]
