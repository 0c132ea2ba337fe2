"""A cell's measured records as columns: what every figure of a cell's summary reads.

A cell's figures are array expressions over its records' fields, so a long cell is summarised without one
`Record` object per request (`run.record_columns.RecordColumns` serves its columns straight from the rows it
keeps on disk, and builds `Record` objects only for the few records a figure reads whole). The same figures
over a list of records (a test, a merge, the live exporter's window) read a `RecordTable.of(recs)`: one formula.

- `ints(name)`: an integer field of `Record` (times, counts, seq, …) as int64, `NONE` where it is None;
- `labels(name)`: any other per-record field (outcome, category, error, …) as an object array;
- `spec_numbers(key)`: a key of the server's per-request `spec` as (float64 values, int8 kinds: `ABSENT`
  where the record's spec lacks the key or holds something other than a number there, `INT`, `FLOAT`);
- `spec_lists(key)`: a list-valued key as (values, lengths): the rows' lists of numbers one after the other
  (int64 where every one is an int, else float64) and each row's length, −1 where the row holds no such list;
- `records(rows)`: the records at those rows, whole (for a figure of a few, e.g. those across the steady
  window's edges); `chunks_elsewhere()`: where a row's per-chunk lists were moved out (`record.chunks_elsewhere`);
- `where(mask)`: the rows where `mask` holds, as a table (`ok()`: the ok ones); `any_value(name)`: whether any
  row holds a value in a field, its column not kept.
Columns are read once and kept for the life of the table; they are read, never written: a column may be a
read-only view (of one value seen n times, of the rows' own array).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Protocol

import numpy as np

from loadgen.names import Outcome
from loadgen.record import CellKey, Record, chunks_elsewhere

NONE = -(1 << 63)  # an integer field that is None
INT_NAMES = frozenset(f.name for f in fields(Record) if f.type in ("int", "int | None"))  # `ints` reads these
ABSENT, INT, FLOAT = 0, 1, 2  # how a spec key is held for one record


class ColumnSource(Protocol):
    """Where a table's columns come from: every row of a cell, in one order."""

    def __len__(self) -> int: ...

    def int_columns(self, names: Sequence[str]) -> list[np.ndarray]: ...

    def label_column(self, name: str) -> np.ndarray: ...

    def spec_number_column(self, key: str) -> tuple[np.ndarray, np.ndarray]: ...

    def spec_list_column(self, key: str) -> tuple[np.ndarray, np.ndarray]: ...

    def records_at(self, rows: np.ndarray) -> list[Record]: ...

    def label_at(self, name: str, row: int) -> object: ...

    def chunks_elsewhere_column(self) -> np.ndarray: ...


class RecordTable:
    """Columns of a cell's records (module docstring); `rows`: the source's rows this table holds (all: None)."""

    def __init__(self, source: ColumnSource, rows: np.ndarray | None = None,
                 whole: RecordTable | None = None):
        self.source = source
        self.rows = rows
        self._whole = whole  # the table of every row of `source`, whose columns a subset picks from
        self._cache: dict[tuple[str, str], object] = {}

    @classmethod
    def of(cls, recs: Sequence[Record] | RecordTable) -> RecordTable:
        """The table of a list of records (itself when given a table)."""
        return recs if isinstance(recs, RecordTable) else cls(RecordsSource(recs))

    def __len__(self) -> int:
        return len(self.source) if self.rows is None else len(self.rows)

    def _cached(self, kind: str, name: str, read):
        key = (kind, name)
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]

    def _pick(self, column: np.ndarray) -> np.ndarray:
        return column if self.rows is None else column[self.rows]

    def ints(self, name: str) -> np.ndarray:
        """Integer field `name` of every row (int64, `NONE` for None)."""
        whole = self._whole
        if whole is not None:  # a subset: its rows of the whole table's column (read from the source once)
            return self._cached("int", name, lambda: self._pick(whole.ints(name)))
        return self._cached("int", name, lambda: self.source.int_columns([name])[0])

    def ints_of(self, names: Sequence[str]) -> list[np.ndarray]:
        """`ints` of each name, the ones not read yet read together (one pass over the kept rows)."""
        whole = self._whole
        if whole is not None:
            whole.ints_of(names)
        else:
            missing = [name for name in names if ("int", name) not in self._cache]
            for name, column in zip(missing, self.source.int_columns(missing) if missing else []):
                self._cache[("int", name)] = column
        return [self.ints(name) for name in names]

    def labels(self, name: str) -> np.ndarray:
        """Field `name` of every row as an object array."""
        whole = self._whole
        if whole is not None:
            return self._cached("label", name, lambda: self._pick(whole.labels(name)))
        return self._cached("label", name, lambda: self.source.label_column(name))

    def spec_numbers(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, kinds) of spec key `key` (module docstring)."""
        def read():
            values, kinds = self._whole.spec_numbers(key) if self._whole is not None else \
                self.source.spec_number_column(key)
            return self._pick(values), self._pick(kinds)
        return self._cached("spec", key, read)

    def spec_lists(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, lengths) of the list-valued spec key `key` (module docstring)."""
        def read():
            values, lengths = self._whole.spec_lists(key) if self._whole is not None else \
                self.source.spec_list_column(key)
            if self.rows is None:
                return values, lengths
            sizes = np.maximum(lengths, 0)
            starts = np.cumsum(sizes) - sizes  # where each row's list begins in `values`
            picked = lengths[self.rows]
            kept = sizes[self.rows]
            into = np.cumsum(kept) - kept  # where each kept row's list begins in the result
            take = np.arange(int(kept.sum())) - np.repeat(into, kept) + np.repeat(starts[self.rows], kept)
            return values[take], picked
        return self._cached("list", key, read)

    def chunks_elsewhere(self) -> np.ndarray:
        """True where the row's per-chunk lists were moved out (`record.chunks_elsewhere`)."""
        whole = self._whole
        if whole is not None:
            return self._cached("mask", "elsewhere", lambda: self._pick(whole.chunks_elsewhere()))
        return self._cached("mask", "elsewhere", lambda: self.source.chunks_elsewhere_column())

    def ok_mask(self) -> np.ndarray:
        """True where the request ended ok."""
        return self._cached("mask", "ok", lambda: self.labels("outcome") == Outcome.OK)

    def where(self, mask: np.ndarray) -> RecordTable:
        """The rows where the bool array `mask` holds, as a table of the same source (this table itself when
        the mask holds everywhere: its columns are not copied)."""
        if mask.all():
            return self
        chosen = np.flatnonzero(mask)
        return RecordTable(self.source, chosen if self.rows is None else self.rows[chosen],
                           self if self._whole is None else self._whole)

    def ok(self) -> RecordTable:
        """The ok rows (`where(ok_mask())`), made once."""
        return self._cached("table", "ok", lambda: self.where(self.ok_mask()))

    def records(self, mask: np.ndarray | None = None) -> list[Record]:
        """The records of the rows where `mask` holds (every row: None), whole, in row order."""
        chosen = np.arange(len(self)) if mask is None else np.flatnonzero(mask)
        rows = chosen if self.rows is None else self.rows[chosen]
        return self.source.records_at(rows)

    def cell(self) -> CellKey | None:
        """The cell of the first row (None: no rows)."""
        if not len(self):
            return None
        first = 0 if self.rows is None else int(self.rows[0])
        return self.source.label_at("cell", first)  # type: ignore[return-value]

    def any_value(self, name: str) -> bool:
        """Whether any row holds a value (not None) in field `name`, its column read but not kept: a figure that
        exists only for some workloads (sessions, reasoning, categories) asks first, and a cell without them
        keeps no column of Nones through its summary."""
        if ("int", name) in self._cache:
            return bool((self.ints(name) != NONE).any())
        if ("label", name) in self._cache:
            return any(v is not None for v in self.labels(name).tolist())
        if name in INT_NAMES:
            return bool((self._pick(self.source.int_columns([name])[0]) != NONE).any())
        return any(v is not None for v in self._pick(self.source.label_column(name)).tolist())


def present(column: np.ndarray) -> np.ndarray:
    """The values of an integer column that are not None."""
    return column[column != NONE]


def or_zero(column: np.ndarray) -> np.ndarray:
    """An integer column with None counted as 0 (the column itself where it holds no None: not to be written)."""
    none = column == NONE
    return np.where(none, 0, column) if none.any() else column


class RecordsSource:
    """The columns of a list of `Record` objects, each read with one pass over the records when first asked."""

    def __init__(self, recs: Sequence[Record]):
        self.recs = recs

    def __len__(self) -> int:
        return len(self.recs)

    def int_columns(self, names: Sequence[str]) -> list[np.ndarray]:
        return [self._int_column(name) for name in names]

    def _int_column(self, name: str) -> np.ndarray:
        get = attrgetter(name)
        try:
            return np.fromiter(map(get, self.recs), dtype=np.int64, count=len(self.recs))
        except TypeError:  # a None among them
            return np.fromiter((NONE if v is None else v for v in map(get, self.recs)), dtype=np.int64,
                               count=len(self.recs))

    def label_column(self, name: str) -> np.ndarray:
        column = np.empty(len(self.recs), dtype=object)
        column[:] = [getattr(r, name) for r in self.recs]
        return column

    def spec_number_column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        values = np.zeros(len(self.recs))
        kinds = np.zeros(len(self.recs), dtype=np.int8)
        for i, r in enumerate(self.recs):
            v = r.spec.get(key) if r.spec else None
            kind = spec_kind(v)
            if kind != ABSENT:
                values[i], kinds[i] = v, kind
        return values, kinds

    def spec_list_column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        flat: list[float] = []
        lengths = np.full(len(self.recs), -1, dtype=np.int64)
        for i, r in enumerate(self.recs):
            v = r.spec.get(key) if r.spec else None
            if isinstance(v, list):
                flat += [x if spec_kind(x) != ABSENT else 0.0 for x in v]
                lengths[i] = len(v)
        return np.array(flat, dtype=np.float64), lengths

    def records_at(self, rows: np.ndarray) -> list[Record]:
        return [self.recs[i] for i in rows.tolist()]

    def label_at(self, name: str, row: int) -> object:
        return getattr(self.recs[row], name)

    def chunks_elsewhere_column(self) -> np.ndarray:
        return np.fromiter(map(chunks_elsewhere, self.recs), dtype=bool, count=len(self.recs))


def spec_kind(value: object) -> int:
    """How a spec value is held as a number: INT (an int or a bool), FLOAT, or ABSENT (anything else)."""
    if isinstance(value, bool | int):
        return INT
    if isinstance(value, float):
        return FLOAT
    return ABSENT
