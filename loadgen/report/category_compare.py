"""Per-category comparison of runs (pure: runs in, text out): for every cell and category present in more
than one run, each run's output tok/s, per-request tok/s, TTFT and accept length, and the change of
output tok/s against the baseline run. Cells without categories add nothing."""

from __future__ import annotations

from typing import Any

from loadgen.report import text_table as tt
from loadgen.results.cell_result import CellResult
from loadgen.results.compare_inputs import Run


def _categories(cell: CellResult | None) -> dict[str, dict[str, Any]]:
    """A run's cell's figures per category ({} without the cell or categories)."""
    return (cell.prompts.by_category or {}) if cell is not None else {}


def rows(runs: list[Run], base: int = 0) -> list[dict[str, Any]]:
    """One row per (cell, category, run) where the category appears in at least two runs' cell."""
    out = []
    for key in sorted({k for r in runs for k in r.cells}):
        by_run = [_categories(r.cells.get(key)) for r in runs]
        for cat in sorted({c for cats in by_run for c in cats}):
            present = [(i, cats[cat]) for i, cats in enumerate(by_run) if cat in cats]
            if len(present) < 2:
                continue
            ref = dict(present).get(base)
            for i, figures in present:
                change = None
                if ref is not None and ref.get("output_tok_s") and figures.get("output_tok_s") is not None:
                    change = figures["output_tok_s"] / ref["output_tok_s"] - 1
                out.append({"key": key, "category": cat, "run": runs[i].name, "change": change, **figures})
    return out


COLUMNS = [
    tt.Column("conc", 5, lambda r: f"{r['key'][2]:g}/s" if r["key"][2] else str(r["key"][1])),
    tt.Column("category", -14, lambda r: r["category"]),
    tt.Column("run", -20, lambda r: r["run"]),
    tt.Column("out tok/s", 10, tt.number("output_tok_s", ".1f")),
    tt.Column("vs base", 8, lambda r: tt.MISSING if r["change"] is None else f"{r['change'] * 100:+.1f}%"),
    tt.Column("req tok/s", 10, tt.number("request_tok_s.mean", ".1f")),
    tt.Column("TTFT ms", 8, tt.millis("ttft_s.mean")),
    tt.Column("accept", 0, tt.number("accept_length.value", ".2f")),
]


def render(runs: list[Run], base: int = 0) -> str | None:
    """The per-category comparison, or None when no category appears in two runs."""
    found = rows(runs, base)
    if not found:
        return None
    return "\n".join(["per category:", tt.header(COLUMNS), *(tt.line(COLUMNS, r) for r in found)])
