"""The per-category table of a dataset run (pure: cells in, text out): one line per category under each
cell, with the figures of `metrics.category`, and the cell's achieved prompt and output lengths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadgen.report import text_table as tt
from loadgen.report.text_table import Column, millis, number
from loadgen.results.cell_result import CellResult
from loadgen.results.figures import RequestCounts

Row = dict[str, Any]  # a category's figures, with its name and its cell


def _load_of(cell: CellResult) -> str:
    key = cell.key
    return f"{key.request_rate:g}/s" if key.request_rate is not None else str(key.concurrency)


def _load(row: Row) -> str:
    return _load_of(row["cell"])


def _accept(row: Row) -> str:
    """A category row's accept length (its figures are a cell's, per category) and the source it came from."""
    acc = row.get("accept_length") or {}
    return tt.MISSING if acc.get("value") is None else f"{acc['value']:.2f} {acc.get('source') or ''}"


def _counts(row: Row) -> str:
    requests: RequestCounts = row.get("requests") or {}
    return tt.counts_text(requests)


def _share(row: Row) -> str:
    share = row.get("output_share")
    return tt.MISSING if share is None else f"{share * 100:.0f}%"


COLUMNS = [
    Column("conc", 5, _load),
    Column("category", -14, lambda item: item["name"]),
    Column("ok/fail", 9, _counts),
    Column("out tok/s", 10, number("output_tok_s", ".1f")),
    Column("share", 6, _share),
    Column("req tok/s", 10, number("request_tok_s.mean", ".1f")),
    Column("TTFT ms", 8, millis("ttft_s.mean")),
    Column("p90", 8, millis("ttft_s.p90")),
    Column("prompt", 7, number("lengths.prompt_tokens.mean", ".0f")),
    Column("output", 7, number("lengths.output_tokens.mean", ".0f")),
    Column("accept", 0, _accept),
]


def items(cell: CellResult) -> list[Row]:
    """The cell's categories as table rows, each with its name, its cell and the category's figures."""
    return [{"name": name, "cell": cell, **figures} for name, figures in (cell.prompts.by_category or {}).items()]


def columns(rows: list[Row]) -> list[Column]:
    """COLUMNS with the category as wide as its longest name (a long one no longer shifts its row)."""
    width = max([14, *(len(item["name"]) for item in rows)])
    return [Column(c.header, -width, c.text) if c.header == "category" else c for c in COLUMNS]


def category_table(cells: Sequence[CellResult]) -> str | None:
    """Every cell's categories under one header; None when no cell has categories."""
    rows = [item for cell in cells for item in items(cell)]
    cols = columns(rows)
    return "\n".join(["per category:", tt.header(cols), *(tt.line(cols, item) for item in rows)]) if rows else None


def _varies(cell: CellResult) -> bool:
    lengths = cell.prompts.lengths or {}
    return any((lengths.get(k) or {}).get("p50") != (lengths.get(k) or {}).get("p90")
               for k in ("prompt_tokens", "output_tokens"))


LENGTH_COLUMNS = [
    tt.CONTEXT,
    Column("conc", 5, _load_of),
    *(Column(f"{what} {stat}", 12, number(f"lengths.{key}.{stat}", ".1f" if stat == "mean" else ".0f"))
      for what, key in (("prompt", "prompt_tokens"), ("output", "output_tokens")) for stat in ("mean", "p50", "p90")),
]


def lengths_table(cells: Sequence[CellResult]) -> str | None:
    """The achieved prompt and output lengths (server usage counts) of every cell, when they vary within a
    cell (a dataset, or a length spread); None when every request of every cell had the same lengths."""
    if not any(_varies(c) for c in cells):
        return None
    return "\n".join(["achieved lengths (tokens):", tt.header(LENGTH_COLUMNS),
                      *(tt.line(LENGTH_COLUMNS, c) for c in cells if c.prompts.lengths)])
