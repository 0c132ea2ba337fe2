"""The one text-table renderer (the matrix, the open-loop table, compare): pure, typed cells or rows in, text out.

A table is a list of `Column`s. A line is each column's text padded to its width, joined by one space:
width > 0 right-aligns to that width, width < 0 left-aligns to −width, width 0 leaves the text as is (the
last column, free-form notes). Missing figures show as "-"; times are shown in ms where a column says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.results.cell_result import CellResult
from loadgen.results.cell_view import figure
from loadgen.results.figures import RequestCounts

MISSING = "-"
DATASET = "data"  # the prompt column of a cell replaying a --dataset's rows (its key's context is 0)


@dataclass(frozen=True)
class Column:
    """One column: its header, its width (see the module docstring) and how an item becomes its text."""

    header: str
    width: int
    text: Callable[[Any], str]


def pad(text: str, width: int) -> str:
    if width < 0:
        return text.ljust(-width)
    return text.rjust(width) if width else text


def join(columns: Sequence[Column], texts: Sequence[str]) -> str:
    """One line from one text per column."""
    return " ".join(pad(t, c.width) for t, c in zip(texts, columns))


def header(columns: Sequence[Column]) -> str:
    return join(columns, [c.header for c in columns])


def texts(columns: Sequence[Column], item: Any) -> list[str]:
    """Each column's text of one item, unpadded."""
    return [c.text(item) for c in columns]


def line(columns: Sequence[Column], item: Any) -> str:
    return join(columns, texts(columns, item))


# ---- formatters --------------------------------------------------------------------------------------------
def field(item: Any, path: str) -> Any:
    """The figure at path "a.b": of a typed cell (`cell_view.figure`, by its JSON names), or `item["a"]["b"]` of
    a dict (a comparison row, a category's figures); None when a step is missing or None."""
    if isinstance(item, CellResult):
        return figure(item, path)
    node: Any = item
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def fmt(x: Any, spec: str) -> str:
    """`format(x, spec)`, or "-" for a missing figure."""
    return MISSING if x is None else format(x, spec)


def fmt_ms(x: float | None) -> str:
    """Seconds shown as ms with one decimal, or "-"."""
    return MISSING if x is None else f"{x * 1e3:.1f}"


def number(path: str, spec: str) -> Callable[[Any], str]:
    """The text of the figure at `path` formatted by `spec`."""
    return lambda item: fmt(field(item, path), spec)


def millis(path: str) -> Callable[[Any], str]:
    """The text of the figure at `path` (seconds) in ms."""
    return lambda item: fmt_ms(field(item, path))


def context(item: Any) -> str:
    """The prompt column of a cell or a row: the requested prompt tokens, or "data" for a dataset cell (its rows'
    own prompts, whose lengths are in the achieved-lengths table)."""
    tokens = item.key.context_tokens if isinstance(item, CellResult) else item["context_tokens"]
    return str(tokens) if tokens else DATASET


CONTEXT = Column("ctx", 6, context)


def ok_failed(cell: CellResult) -> str:
    """"ok/failed" request counts of a cell (`counts_text`)."""
    return counts_text(cell.requests.requests)


def counts_text(req: RequestCounts) -> str:
    """"ok/failed" request counts, "+Nc" for N requests cancelled by the client (an interrupt) and "+Na" for N it
    closed on purpose (abandoned, --cancel-fraction), which are neither."""
    cancelled = f"+{req['cancelled']}c" if req.get("cancelled") else ""
    abandoned = f"+{req['abandoned']}a" if req.get("abandoned") else ""
    return f"{req.get('ok', 0)}/{req.get('failed', 0)}{cancelled}{abandoned}"


def note_refs(items: Sequence[Any], note_of: Callable[[Any], str],
              label_of: Callable[[Any], str]) -> tuple[list[str], list[str]]:
    """(each item's note reference, "n1" or "", the notes as lines "n1 <label>, <label>: <note>"), one number per
    distinct note text, so a long reason never widens the table; a note names every row that carries it.
    `note_of(item)` gives the text, `label_of(item)` the row."""
    numbers: dict[str, int] = {}
    labels: dict[str, list[str]] = {}
    refs = []
    for item in items:
        note = note_of(item)
        if not note:
            refs.append("")
            continue
        numbers.setdefault(note, len(numbers) + 1)
        labels.setdefault(note, []).append(label_of(item))
        refs.append(f"n{numbers[note]}")
    lines = [f"n{n} {', '.join(dict.fromkeys(labels[note]))}: {note}" for note, n in numbers.items()]
    return refs, lines
