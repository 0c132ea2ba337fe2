"""`doc(...)`: a result field with its meaning and unit (docs/results.md is generated from them); `KeyedPart`: a
part written as an object under a key of its own."""

from __future__ import annotations

from dataclasses import asdict, field, fields
from typing import Any, Self


def doc(text: str, unit: str = "", default: Any = None, optional: bool = False) -> Any:
    """A field with its documentation (docs/results.md) and a default; an `optional` one is written only when
    it has a value (figures of one kind of load)."""
    meta = {"doc": text, "unit": unit, "optional": optional}
    if isinstance(default, list | dict):
        return field(default_factory=type(default), metadata=meta)
    return field(default=default, metadata=meta)


class KeyedPart:
    """A dataclass part of a cell written as one object under its own key (`slo`, `correctness`) and read back
    into its type, keys it does not know (a newer loadgen's) left out."""

    def to_json(self) -> dict:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, data: dict) -> Self:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in known})
