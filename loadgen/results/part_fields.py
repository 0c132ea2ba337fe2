"""How a part of a cell's result declares its fields: `doc(...)` (meaning, unit, default; docs/results.md is
generated from it) and `Figures`, a block of figures documented per field."""

from __future__ import annotations

from dataclasses import field
from typing import Any

Figures = dict[str, Any]  # a distribution {mean, p50, …, samples} or another block of figures, documented per field


def doc(text: str, unit: str = "", default: Any = None, optional: bool = False) -> Any:
    """A field with its documentation (docs/results.md) and a default; an `optional` one is written only when
    it has a value (figures of one kind of load)."""
    meta = {"doc": text, "unit": unit, "optional": optional}
    if isinstance(default, list | dict):
        return field(default_factory=type(default), metadata=meta)
    return field(default=default, metadata=meta)
