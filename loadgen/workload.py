"""Prompts of an exact token length, natural text, unique per request, deterministic under a seed.

The default corpus is the Python standard library's own source files on this machine: real code and
docstrings, so a speculative drafter sees text it can predict (acceptance on random tokens is meaningless).
Each prompt = a unique prefix (run id, cell, sequence number) + a corpus window; the unique prefix makes a
prefix cache unable to serve any request from an earlier one.
"""

from __future__ import annotations

import random
import sysconfig
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

CORPUS_BYTES = 3_000_000

CountTokens = Callable[[list[str]], Awaitable[list[int]]]


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
    texts: list[str] = []
    if p.suffix in (".jsonl", ".json") or raw.lstrip().startswith("{"):
        for line in raw.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(row, dict):
                continue
            text = row.get("text") or row.get("prompt")
            if not text and isinstance(row.get("messages"), list):
                text = "\n".join(str(m.get("content", "")) for m in row["messages"] if isinstance(m, dict))
            if isinstance(text, str) and text.strip():
                texts.append(text)
    else:
        texts = [t.strip() for t in raw.split("\n\n") if t.strip()]
    if not texts:
        raise WorkloadError(f"--prompts {path}: no usable rows (expected JSONL with a 'text', 'prompt' or "
                            "'messages' field, or plain text paragraphs)")
    return texts


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


def unique_prefix(run_id: str, context_tokens: int, concurrency, seq: int) -> str:
    """The request's unique first line. The sequence number has a fixed width so that a sized prompt can be
    reused under another number (`relabel`) with the same token count."""
    return f"[{run_id} c{concurrency} n{context_tokens} {seq_tag(seq)}]\n"


def seq_tag(seq: int) -> str:
    return f"#{seq:08d}"


def relabel(body: dict, old_seq: int, new_seq: int) -> dict:
    """A copy of a request body whose prompt carries `new_seq` instead of `old_seq` in its unique prefix."""
    old, new = seq_tag(old_seq), seq_tag(new_seq)
    out = dict(body)
    if "messages" in out:
        msgs = [dict(m) for m in out["messages"]]
        msgs[0]["content"] = msgs[0]["content"].replace(old, new, 1)
        out["messages"] = msgs
    for key in ("prompt", "text"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace(old, new, 1)
    return out


async def fit_prompts(prefixes: list[str], bodies: list[str], targets: list[int],
                      count_tokens: CountTokens, rounds: int = 24) -> tuple[list[str], list[int]]:
    """Cut each `prefix + body[:L]` so it counts exactly `target` tokens by the server's own tokenizer.

    Binary search on L for every prompt in lockstep (one batched tokenize call per round). Tokenizers are
    monotone in practice when characters are appended; where a cut jumps from target−1 to target+1 tokens,
    the shorter cut is padded with single-character tokens until it matches. Returns the texts and their
    counts (a count may differ from the target only when the body is too short).
    """
    n = len(bodies)
    lo = [0] * n
    hi = [len(b) for b in bodies]
    best = [0] * n
    best_count = [0] * n
    for _ in range(rounds):
        active = [i for i in range(n) if lo[i] <= hi[i]]
        if not active:
            break
        mids = [(lo[i] + hi[i]) // 2 for i in active]
        counts = await count_tokens([prefixes[i] + bodies[i][:m] for i, m in zip(active, mids)])
        for i, m, c in zip(active, mids, counts):
            if c <= targets[i]:
                if m >= best[i]:
                    best[i], best_count[i] = m, c
                lo[i] = m + 1
            else:
                hi[i] = m - 1
    texts = [prefixes[i] + bodies[i][:best[i]] for i in range(n)]
    for _ in range(8):
        short = [i for i in range(n) if best_count[i] < targets[i] and best[i] < len(bodies[i])]
        if not short:
            break
        for i in short:
            texts[i] += " ." * (targets[i] - best_count[i])
        counts = await count_tokens([texts[i] for i in short])
        for i, c in zip(short, counts):
            if c > targets[i]:
                texts[i] = texts[i][: len(texts[i]) - 2 * (c - targets[i])]
            best_count[i] = c if c <= targets[i] else targets[i]
    final = await count_tokens(texts)
    return texts, final


def chars_for(tokens: int, chars_per_token: float = 4.0) -> int:
    """A generous window: enough characters to hold `tokens` tokens of code/prose (≈3–4 chars/token)."""
    return int(tokens * chars_per_token * 2) + 256


def seeded_rng(seed: int, *parts: object) -> random.Random:
    return random.Random(f"{seed}:" + ":".join(map(str, parts)))
