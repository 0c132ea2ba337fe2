"""A typed cell read by the names its JSON gives its figures: `value(cell, "ttft_s")` is the field of the part
that holds it, `figure(cell, "ttft_s.p50")` a step further into its block. The names are the results file's
(docs/results.md), so a view, the HTML's `data-metric` and the exporter's gauges name a figure alike. A path
is checked against the parts' declared types (`check_path`): a name no part or typed block declares
("ttft_s.p5O") is an error at once (`KeyError`), never a silent None; only a block whose keys vary (a `dict`)
is not checked past. `catalog_figure(cell, key)` reads a figure of the catalog (`metrics/catalog.py`) by its key.
"""

from __future__ import annotations

import types
from dataclasses import is_dataclass
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from loadgen.metrics import catalog
from loadgen.results.cell_result import (
    KEY_FIELDS,
    PARTS,
    RESERVED,
    TYPED_RESERVED,
    CellResult,
    part_keys,
)


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


def _one(kind: Any) -> Any:
    """`X | None` → X (a type of several others: itself)."""
    if get_origin(kind) in (Union, types.UnionType):
        kinds = [k for k in get_args(kind) if k is not type(None)]
        return kinds[0] if len(kinds) == 1 else kind
    return kind


def _declared(kind: Any) -> dict[str, Any] | None:
    """The keys a declared type gives its values (a TypedDict's keys, a dataclass's fields) with their types,
    {} for a number, a string or a bool (no keys at all), None for a type whose keys vary (a dict, a list)."""
    kind = _one(kind)
    if is_typeddict(kind) or (isinstance(kind, type) and is_dataclass(kind)):
        return get_type_hints(kind)
    return {} if kind in (int, float, str, bool) else None


def _field_type(name: str) -> Any:
    """The declared type of the cell's field `name` (Any for a key field, the judged status or error)."""
    part = _owner().get(name)
    if part is not None:
        return get_type_hints(PARTS[part])[name]
    return TYPED_RESERVED.get(name, Any)


@cache
def check_path(path: str) -> None:
    """Raise `KeyError` when `path` names a field no part has, or a key its typed block does not declare."""
    first, *rest = path.split(".")
    if first not in _owner() and first not in (*KEY_FIELDS, *RESERVED, "status", "error", "run_id"):
        raise KeyError(f"{first} is no field of a cell's result (parts: {', '.join(PARTS)})")
    kind = _field_type(first)
    for i, name in enumerate(rest):
        keys = _declared(kind)
        if keys is None:
            return
        if name not in keys:
            block = ".".join([first, *rest[:i]])
            has = f"it has {', '.join(keys)}" if keys else "it is a value, not a block"
            raise KeyError(f"{block}.{name}: {block} has no {name!r} ({has})")
        kind = keys[name]


def declared(path: str) -> bool:
    """Whether the cell's types declare `path` (`check_path` passes)."""
    try:
        check_path(path)
    except KeyError:
        return False
    return True


def catalog_figure(cell: CellResult, key: str) -> float | None:
    """The catalog's figure `key` (`metrics/catalog.py`) of the cell: a key of no figure is a `KeyError`."""
    return catalog.get(key).read(lambda path: figure(cell, path))


def figure(cell: CellResult, path: str) -> Any:
    """The figure at `path` ("ttft_s.p50", "slo.good_output_tok_s", "gpu_activity.total.sm_active"); None
    when a step is missing or None; a path the cell's types do not declare is a `KeyError` (`check_path`)."""
    check_path(path)
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
