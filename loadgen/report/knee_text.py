"""The knee named in words, for the end-of-run summary, `compare` and the HTML report (`metrics/knee.py`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from loadgen.metrics.knee import KNEE_GROWTH, knees
from loadgen.names import CellStatus
from loadgen.results.cell_result import CellResult


def knee_phrase(found: dict[str, Any]) -> str:
    """"32 (32→64: +4.0% per doubling)" or "none up to 128 (still +35.2% per doubling)": one decimal, so a
    growth just under the threshold does not read as the threshold itself; then the concurrencies left out
    ("; c=5 left out: measured twice, 57 and 542 tok/s")."""
    left = "".join(f"; c={c} left out: measured twice, {lo:.0f} and {hi:.0f} tok/s"
                   for c, lo, hi in found.get("left_out") or [])
    if not found["growth"]:
        return "not measured" + left
    if found["knee"] is None:
        last = found["growth"][-1][2]
        return f"none up to {found['max_concurrency']} (still {last:+.1%} per doubling)" + left
    c0, c1, g = next(step for step in found["growth"] if step[0] == found["knee"])
    return f"{c0} ({c0}→{c1}: {g:+.1%} per doubling)" + left


def knee_points(cells: Sequence[CellResult]) -> dict[int, list[tuple[int, float]]]:
    """{context_tokens: [(concurrency, output tok/s), …]} over the usable closed-loop cells (status ok, with
    output tok/s), in the order given."""
    points: dict[int, list[tuple[int, float]]] = {}
    for c in cells:
        tok_s = c.throughput.output_tok_s
        if c.key.request_rate is None and c.status is CellStatus.OK and tok_s:
            points.setdefault(c.key.context_tokens, []).append((c.key.concurrency, tok_s))
    return points


def knee_lines(cells: Sequence[CellResult]) -> list[str]:
    """One "ctx N: …" phrase per prompt length with two or more usable concurrencies."""
    return [f"ctx {ctx}: {knee_phrase(found)}" for ctx, found in knees(knee_points(cells)).items()]


def knee_summary(cells: Sequence[CellResult], name: str | None = None) -> str | None:
    """The line after a run's matrix, wrapped at 120 columns (None when no prompt length has two usable
    concurrencies)."""
    lines = knee_lines(cells)
    if not lines:
        return None
    who = f"{name}: " if name else ""
    text = f"knee (output tok/s grows < {KNEE_GROWTH:.0%} per doubling past it): {who}" + "; ".join(lines)
    return textwrap.fill(text, 120, subsequent_indent="    ")
