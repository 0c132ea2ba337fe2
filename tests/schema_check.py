"""The results schema of docs/results.md, checked on a document loadgen wrote (a run, a sweep's configuration,
a merge): every field documented, of its documented type, each cell read back into its typed result and
written out again unchanged, and its status the judgement of its incidents."""

from __future__ import annotations

import types
import typing
from dataclasses import fields

from loadgen.results.cell_result import PARTS, from_json
from loadgen.results.incidents import Incident, judge
from loadgen.results.schema_doc import DOCUMENT_FIELDS, documented_cell_fields

JSON_TYPES = {int: (int,), float: (int, float), str: (str,), bool: (bool,), dict: (dict,), list: (list,),
              type(None): (type(None),)}


def _allowed(hint) -> tuple[type, ...]:
    """The JSON types a field's annotation admits (`float | None` → int, float, None)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(t for arg in typing.get_args(hint) for t in _allowed(arg))
    if typing.is_typeddict(hint):  # a block of figures of a known shape (results/figures.py): a JSON object
        return (dict,)
    origin = typing.get_origin(hint) or hint
    return JSON_TYPES.get(origin, (object,))


def field_types() -> dict[str, tuple[type, ...]]:
    out = {}
    for cls in PARTS.values():
        hints = typing.get_type_hints(cls)
        out |= {f.name: _allowed(hints[f.name]) for f in fields(cls)}
    return out


def assert_documented(doc: dict) -> None:
    unknown = set(doc) - set(DOCUMENT_FIELDS)
    assert not unknown, f"document fields missing from docs/results.md: {sorted(unknown)}"
    documented, kinds = documented_cell_fields(), field_types()
    for cell in doc["cells"]:
        assert not set(cell) - documented, f"cell fields missing from docs/results.md: {set(cell) - documented}"
        wrong = {k: type(v).__name__ for k, v in cell.items() if k in kinds and not isinstance(v, kinds[k])}
        assert not wrong, f"fields of another type than documented: {wrong}"
        assert from_json(cell).to_json() == cell
        verdict = judge([Incident.from_json(i) for i in cell["incidents"]])
        assert (cell["status"], cell["error"]) == (verdict.status, verdict.error)
