"""Cells a test writes by hand as JSON (only the keys it is about), read into the typed result the views take,
as a results file's cells are read where the file is loaded."""

from __future__ import annotations

from loadgen.results.cell_result import CellResult, from_json


def typed(data: dict) -> CellResult:
    """The cell `data` is the JSON of, read back through `from_json`; keyed (0, 0) when it names no key."""
    return from_json({"context_tokens": 0, "concurrency": 0} | data)
