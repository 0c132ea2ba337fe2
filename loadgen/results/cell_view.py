"""A typed cell read by the names its JSON gives its figures: `value(cell, "ttft_s")` is the field of the part
that holds it, `figure(cell, "ttft_s.p50")` a step further into its block. The names are the results file's
(docs/results.md), so a view, the HTML's `data-metric` and the exporter's gauges name a figure alike; a name of
no part is an error at once (`KeyError`), never a silent None.

`as_result` takes a cell as the views are handed it: a `CellResult`, or the JSON object of one (a file read
back, an older file, a test's hand-written cell), read through the one `cell_result.from_json`.
"""

from __future__ import annotations

from dataclasses import is_dataclass
from functools import cache
from typing import Any, Protocol

from loadgen.record import CellKey
from loadgen.results.cell_result import KEY_FIELDS, PARTS, RESERVED, CellResult, from_json, part_keys

Cell = CellResult | dict  # what a view may be handed; `as_result` makes the one the view reads


def as_result(cell: Cell) -> CellResult:
    """The typed cell: itself, or its JSON object read back (a cell without a key gets the key 0, 0)."""
    if isinstance(cell, CellResult):
        return cell
    return from_json({"context_tokens": 0, "concurrency": 0} | cell)


class HasCells(Protocol):
    """A configuration's results as the views are handed them (`compare.Run`): its cells by key."""

    cells: dict


def results_of(run: HasCells) -> dict[CellKey, CellResult]:
    """The run's cells by key, each typed (`as_result`)."""
    return {key: as_result(cell) for key, cell in run.cells.items()}


@cache
def _owner() -> dict[str, str]:
    return part_keys()


def value(cell: CellResult, name: str) -> Any:
    """The cell's field `name` (a key of its JSON): a part's field, a key field, a reserved part, or the
    judged status and error."""
    part = _owner().get(name)
    if part is not None:
        return getattr(getattr(cell, part), name)
    if name in KEY_FIELDS:
        return getattr(cell.key, name)
    if name in (*RESERVED, "status", "error", "run_id"):
        return getattr(cell, name)
    raise KeyError(f"{name} is no field of a cell's result (parts: {', '.join(PARTS)})")


def step(node: Any, name: str) -> Any:
    """One step into a block of figures: a key of a dict, a field of a typed part (`Slo`); None past a leaf."""
    if isinstance(node, dict):
        return node.get(name)
    return getattr(node, name, None) if is_dataclass(node) else None


def figure(cell: CellResult, path: str) -> Any:
    """The figure at `path` ("ttft_s.p50", "slo.good_output_tok_s", "gpu_activity.total.sm_active"); None
    when a step is missing or None."""
    first, *rest = path.split(".")
    node = value(cell, first)
    for name in rest:
        if node is None:
            return None
        node = step(node, name)
    return node


def number(cell: CellResult, path: str) -> float | None:
    """`figure` when it is a number (a bool is not), else None."""
    node = figure(cell, path)
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None
