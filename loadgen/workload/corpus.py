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

from loadgen.workload.textfile import BadRow, WorkloadError, check_bad_rows, read_text

CORPUS_BYTES = 3_000_000
PROMPTS_EXPECTED = "expected JSONL with a 'text', 'prompt' or 'messages' field, or plain text paragraphs"
__all__ = ["WorkloadError", "Corpus", "load_prompts_file", "stdlib_corpus", "seeded_rng"]


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


def load_prompts_file(path: str, max_bad_rows: int = 0, quiet: bool = False) -> list[str]:
    """Texts from a user file, used as a text source (cut into windows of exact length, not replayed): JSONL
    rows with `text`, `prompt` or `messages` (contents joined), or plain text (paragraphs separated by blank
    lines). Every unusable JSONL row is named (file:line); WorkloadError when the file is not text, nothing
    is usable, or more than `max_bad_rows` rows are bad."""
    raw = read_text(path, "--prompts")
    if Path(path).suffix in (".jsonl", ".json") or raw.lstrip().startswith("{"):
        texts, bad = [], []
        for i, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            text, why = _row_text(line)
            if text is None:
                bad.append(BadRow(i, why))
            else:
                texts.append(text)
        check_bad_rows("--prompts", path, bad, len(texts), max_bad_rows, quiet, PROMPTS_EXPECTED)
        return texts
    texts = [t.strip() for t in raw.split("\n\n") if t.strip()]
    check_bad_rows("--prompts", path, [], len(texts), max_bad_rows, quiet, PROMPTS_EXPECTED)
    return texts


def _row_text(line: str) -> tuple[str | None, str]:
    """(the prompt of one JSONL line, or None with the reason it is unusable)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON ({str(exc).split(':')[0]})"
    if not isinstance(row, dict):
        return None, "not a JSON object"
    text = row.get("text") or row.get("prompt")
    if not text and isinstance(row.get("messages"), list):
        text = "\n".join(str(m.get("content", "")) for m in row["messages"] if isinstance(m, dict))
    if text is None and not ({"text", "prompt", "messages"} & row.keys()):
        return None, "no prompt field (expected text, prompt or messages)"
    return (text, "") if isinstance(text, str) and text.strip() else (None, "empty prompt")


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
