"""`doc(...)`: a result field with its meaning and unit (docs/results.md is generated from them)."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def doc(text: str, unit: str = "", default: Any = None, optional: bool = False) -> Any:
    """A field with its documentation (docs/results.md) and a default; an `optional` one is written only when
    it has a value (figures of one kind of load)."""
    meta = {"doc": text, "unit": unit, "optional": optional}
    if isinstance(default, list | dict):
        return field(default_factory=type(default), metadata=meta)
    return field(default=default, metadata=meta)
