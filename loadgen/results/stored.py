"""Cells already on disk, for plain runs and sweeps alike: which are kept on resume, and their records.

One rule (`incidents.finished`): a stored cell is kept, and not measured again, when it was judged ok and was
not stopped early by an interrupt; every other stored cell is measured again. One way with records: the
records (JSONL) keep only the lines of kept cells, of the run that measured them, so a cell measured again
leaves no records of its thrown-away attempt behind.
"""

from __future__ import annotations

import os
from collections.abc import Collection

import orjson

from loadgen.files import read_jsonl, write_atomic
from loadgen.record import CellKey, cell_key
from loadgen.results.cell_result import CellResult, from_json


def stored_cells(doc: dict | None) -> list[CellResult]:
    """Every cell of a results document, read back into its typed result."""
    cells = (doc or {}).get("cells") or []
    return [from_json(c) for c in cells if isinstance(c, dict) and "context_tokens" in c and "concurrency" in c]


def kept_cells(doc: dict | None, wanted: Collection[CellKey] | None) -> list[CellResult]:
    """The stored cells a resumed run or sweep keeps: finished, and part of the matrix (`wanted`; None: any)."""
    return [c for c in stored_cells(doc) if c.finished and (wanted is None or c.key in wanted)]


def ok_keys(cells: list[CellResult]) -> set[CellKey]:
    """The cells that stand as done: judged ok and not cut short (`incidents.finished`; a cell an interrupt
    stopped early is measured again on resume, so it is no ok cell of a summary either)."""
    return {c.key for c in cells if c.finished}


def prune_records(path: str, kept: list[CellResult]) -> int:
    """Rewrite the JSONL keeping only records of `kept` cells (by their run id); a torn last line (a killed
    run) goes too. Returns how many records were dropped."""
    if not os.path.exists(path):
        return 0
    keep = {(c.run_id, c.key) for c in kept}
    rows = read_jsonl(path)
    good = [r for r in rows if (r.get("run_id"), cell_key(r["cell"])) in keep]
    dropped = len(rows) - len(good)
    with open(path, "rb") as fh:
        torn = os.path.getsize(path) > 0 and not fh.read().endswith(b"\n")
    if dropped or torn:
        write_atomic(path, b"".join(orjson.dumps(r) + b"\n" for r in good))
    return dropped
