"""Where prompt text comes from: natural text, cut into windows, deterministic under a seed.

The default corpus is the Python standard library's own source files on this machine: real code and
docstrings, so a speculative drafter sees text it can predict (acceptance on random tokens is meaningless).
`--prompts FILE` takes the user's JSONL or plain text instead. A prompt is a unique prefix (`prefix`) + a
corpus window, cut to an exact token count by the server's tokenizer (`sizing`).
"""

from __future__ import annotations

import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import orjson

CORPUS_BYTES = 3_000_000


class WorkloadError(Exception):
    pass


def stdlib_corpus(max_bytes: int = CORPUS_BYTES) -> str:
    """Concatenated text of the standard library's .py files, in a fixed (sorted) order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    size = 0
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2:] or path.name.startswith("test"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(text)
        size += len(text)
        if size >= max_bytes:
            break
    if size < 100_000:
        raise WorkloadError(f"the standard library at {root} is too small to build a corpus; use --prompts FILE")
    return "\n".join(parts)


def load_prompts_file(path: str) -> list[str]:
    """Texts from a user file: JSONL rows with `text`, `prompt` or `messages` (user contents joined), or
    plain text (paragraphs separated by blank lines). Raises WorkloadError when nothing usable is found."""
    p = Path(path)
    if not p.is_file():
        raise WorkloadError(f"--prompts {path}: no such file; give a JSONL or text file of prompts")
    raw = p.read_text(encoding="utf-8", errors="replace")
    if p.suffix in (".jsonl", ".json") or raw.lstrip().startswith("{"):
        texts = [t for t in map(_row_text, raw.splitlines()) if t]
    else:
        texts = [t.strip() for t in raw.split("\n\n") if t.strip()]
    if not texts:
        raise WorkloadError(f"--prompts {path}: no usable rows (expected JSONL with a 'text', 'prompt' or "
                            "'messages' field, or plain text paragraphs)")
    return texts


def _row_text(line: str) -> str | None:
    """The prompt of one JSONL line; None for a blank, malformed or textless row (skipped, not fatal)."""
    try:
        row = orjson.loads(line) if line.strip() else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(row, dict):
        return None
    text = row.get("text") or row.get("prompt")
    if not text and isinstance(row.get("messages"), list):
        text = "\n".join(str(m.get("content", "")) for m in row["messages"] if isinstance(m, dict))
    return text if isinstance(text, str) and text.strip() else None


@dataclass
class Corpus:
    """A long text to cut prompt windows from. User prompts shorter than a window are concatenated."""

    text: str

    @classmethod
    def from_texts(cls, texts: list[str]) -> "Corpus":
        return cls("\n\n".join(texts))

    def window(self, rng: random.Random, n_chars: int) -> str:
        text = self.text
        while len(text) < n_chars + 1:
            text = text + "\n\n" + self.text
        start = rng.randrange(0, len(text) - n_chars)
        nl = text.rfind("\n", 0, start)
        start = nl + 1 if nl >= 0 and start - nl < 200 else start
        return text[start:start + n_chars]


def seeded_rng(seed: int, *parts: object) -> random.Random:
    return random.Random(f"{seed}:" + ":".join(map(str, parts)))
