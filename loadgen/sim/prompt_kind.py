"""What kind of text a prompt is, and how well the simulated drafter predicts its answer.

A drafter accepts more on code (repetitive syntax, identifiers it has seen) than on prose (chat,
translation, summaries): Spec-Bench reports results per category for this reason. The simulator looks at the
prompt's first `SAMPLE_CHARS` (1500) characters: code-like symbols and indented lines per character at least
`CODE_THRESHOLD` make it `code`, anything else `prose`. A kind scales the drafted tokens accepted per step:
a_kind = 1 + factor·(a − 1), where a is the configuration's accept length (`model.mean_accept_length`), which
stays the figure for code, the default corpus's text.
"""

from __future__ import annotations

SAMPLE_CHARS = 1500
CODE_SYMBOLS = "{}()[];=<>_#*/|&%"
_SYMBOL_BYTES = CODE_SYMBOLS.encode()  # one C pass counts them all: len − len(without them)
INDENT = "\n    "
INDENT_WEIGHT = 4
CODE_THRESHOLD = 0.04
FACTORS = {"code": 1.0, "prose": 0.6}


def code_score(text: str) -> float:
    """(code symbols + 4 × indented lines) / characters, over the first SAMPLE_CHARS characters."""
    t = text[:SAMPLE_CHARS]
    if not t:
        return 0.0
    raw = t.encode("utf-8", "replace")
    symbols = len(raw) - len(raw.translate(None, _SYMBOL_BYTES))
    return (symbols + INDENT_WEIGHT * t.count(INDENT)) / len(t)


def prompt_kind(text: str) -> str:
    return "code" if code_score(text) >= CODE_THRESHOLD else "prose"


def chat_text(messages: list) -> str:
    """The text a chat prompt's kind is judged on: its contents, joined, up to SAMPLE_CHARS characters."""
    parts, size = [], 0
    for m in messages:
        if isinstance(m, dict) and size < SAMPLE_CHARS:
            parts.append(str(m.get("content") or "")[:SAMPLE_CHARS])
            size += len(parts[-1])
    return "\n".join(parts)


def kind_accept_mean(base: float, kind: str) -> float:
    """a_kind = 1 + FACTORS[kind]·(base − 1): the mean tokens per verify step for prompts of this kind."""
    return 1.0 + FACTORS[kind] * (base - 1.0)
