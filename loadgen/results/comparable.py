"""Whether runs measured the same thing: the one rule `compare`, `report` and the HTML report apply before
they put runs side by side.

Two runs are comparable when they agree on every setting in `SETTINGS`: what each request asks for (max
tokens, temperature, ignore-eos), how it is asked (API, model) and what the prompts are (the prompt source).
A 512-token run beside an 8-token run says nothing about the server, so a difference is refused unless the
user allows it, and then it is printed above the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from loadgen.errors import UsageError


class NamedDoc(Protocol):
    """A run as the comparisons hold it (`compare.Run`): its display name and its results document."""

    name: str
    doc: dict


def _args(doc: dict) -> dict:
    return doc.get("args") or {}


def _target(doc: dict) -> dict:
    return doc.get("target") or {}


def _prompt_source(doc: dict) -> str:
    args = _args(doc)
    for key in ("prompts_file", "dataset"):
        if args.get(key):
            return f"{key.replace('_', ' ')} {args[key]}"
    return "built-in corpus"


def max_tokens(doc: dict) -> Any:
    """What the requests asked for: --max-tokens, or a dataset's rows' own ("per row 32–64", "per row 32–64,
    else 512" when some rows give none), which --max-tokens then does not describe."""
    own = (doc.get("prompt_sizing") or {}).get("row_max_tokens")
    asked = _args(doc).get("max_tokens")
    if not own:
        return asked
    span = f"{own['min']}" if own["min"] == own["max"] else f"{own['min']}–{own['max']}"
    every = own["rows"] == (doc.get("prompt_sizing") or {}).get("rows")
    return f"per row {span}" + ("" if every else f", else {asked}")


# setting → how to read it from a results document
SETTINGS: dict[str, Callable[[dict], Any]] = {
    "max tokens": max_tokens,
    "API": lambda doc: _target(doc).get("api") or _args(doc).get("api"),
    "model": lambda doc: _target(doc).get("model") or _args(doc).get("model"),
    "temperature": lambda doc: _args(doc).get("temperature"),
    "ignore-eos": lambda doc: _args(doc).get("ignore_eos"),
    "prompt source": _prompt_source,
}


def mismatches(runs: Sequence[NamedDoc]) -> list[str]:
    """One line per setting on which the runs differ: 'max tokens: base=512, short=8' (each run's value, in
    the order given); empty when they are comparable. A run with no cells (a configuration that measured
    nothing) compares nothing, so it is left out."""
    runs = [r for r in runs if r.doc.get("cells")]
    out = []
    for setting, read in SETTINGS.items():
        values = [(r.name, read(r.doc)) for r in runs]
        if len({repr(v) for _, v in values}) > 1:
            out.append(f"{setting}: " + ", ".join(f"{name}={value}" for name, value in values))
    return out


def check_comparable(runs: Sequence[NamedDoc], allow_mismatch: bool) -> list[str]:
    """The lines to print above the table: none when the runs are comparable, the differences when
    `allow_mismatch`; else raises UsageError (exit 2) listing them."""
    found = mismatches(runs)
    if found and not allow_mismatch:
        raise UsageError("these runs measured different things, so their figures do not compare: "
                         + "; ".join(found) + " (measure them alike, or pass --allow-mismatch to compare anyway)")
    return [f"warning: runs differ (--allow-mismatch): {line}" for line in found]
