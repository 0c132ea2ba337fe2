"""The server's per-request `spec` dicts of a cell's kept records, as columns (`record_columns.RecordColumns`).

A key whose values are numbers is one float64 and one kind byte a record (ints stay ints: `INT`); a key whose
values are lists of ints (SGLang's `spec_correct_drafts_histogram`) is one int64 array of every list one after
the other and where each record's ends; a record whose spec holds anything else (a string, a bool, a nested
dict) keeps its dict as it was. `spec(i)` gives the dict back equal; `number_column`/`list_column` serve
`metrics.record_table.RecordTable.spec_numbers`/`spec_lists`.
"""

from __future__ import annotations

from array import array

import numpy as np

from loadgen.metrics.record_table import ABSENT, FLOAT, INT, spec_kind

KIND = {int: INT, float: FLOAT}
LIST = 3  # a spec key held as a list of ints, for one record


class _SpecColumn:
    """A spec key whose values are numbers: one float64 and one kind (ABSENT, INT, FLOAT) a record."""

    __slots__ = ("values", "kinds")

    def __init__(self, rows: int = 0):
        self.values = array("d", bytes(8 * rows))
        self.kinds = array("b", bytes(rows))

    @staticmethod
    def fits(value: object) -> bool:
        return type(value) in KIND

    def append(self, value: float | None) -> None:
        """One record's value (`fits` it, or None: absent)."""
        if value is None:
            self.values.append(0.0)
            self.kinds.append(ABSENT)
        else:
            self.values.append(value)
            self.kinds.append(KIND[type(value)])

    def value(self, i: int) -> object:
        kind = self.kinds[i]
        return None if kind == ABSENT else int(self.values[i]) if kind == INT else self.values[i]


class _ListColumn:
    """A spec key whose values are lists of ints (SGLang's `spec_correct_drafts_histogram`): the lists one after
    the other in one int64 array, where each record's list ends, and whether the record has one."""

    __slots__ = ("values", "ends", "kinds")

    def __init__(self, rows: int = 0):
        self.values = array("q")
        self.ends = array("q", bytes(8 * rows))
        self.kinds = array("b", bytes(rows))

    @staticmethod
    def fits(value: object) -> bool:
        return type(value) is list and all(type(x) is int for x in value)

    def append(self, value: list[int] | None) -> None:
        """One record's list (`fits` it, or None: absent)."""
        if value is not None:
            self.values.extend(value)
        self.ends.append(len(self.values))
        self.kinds.append(ABSENT if value is None else LIST)

    def value(self, i: int) -> object:
        if self.kinds[i] == ABSENT:
            return None
        return self.values[self.ends[i - 1] if i else 0:self.ends[i]].tolist()


def _column_for(value: object) -> type[_SpecColumn] | type[_ListColumn] | None:
    """The kind of column a spec value can be kept in (None: it can't, the spec is kept as it was)."""
    if _SpecColumn.fits(value):
        return _SpecColumn
    if _ListColumn.fits(value):
        return _ListColumn
    return None


class SpecColumns:
    """The `spec` of every record appended, as columns (module docstring)."""

    def __init__(self) -> None:
        self.keys: dict[str, _SpecColumn | _ListColumn] = {}
        self.none = array("b")  # 1 where spec is None
        self.other: dict[int, dict] = {}  # a spec with values other than numbers or lists of ints, as it was
        self._order: tuple = ()  # the keys of the columns, in order
        self._columns: list[_SpecColumn | _ListColumn] = []
        self._types: tuple | None = None  # value types that fit every column (number columns only), in order

    def append(self, i: int, spec: dict | None) -> None:
        """Record `i`'s spec (records are appended in order)."""
        if spec is None:
            self.none.append(True)
            for column in self._columns:
                column.append(None)
            return
        self.none.append(False)
        if tuple(spec) == self._order:  # the common case: the keys of every column
            values = spec.values()
            if tuple(map(type, values)) == self._types or all(
                    column.fits(value) for column, value in zip(self._columns, values)):
                for column, value in zip(self._columns, values):
                    column.append(value)
                return
        for key, value in spec.items():
            kind = _column_for(value)
            if key not in self.keys and kind is not None:
                self.keys[key] = kind(i)
        fits = all(key in self.keys and self.keys[key].fits(value) for key, value in spec.items())
        if not fits:
            self.other[i] = spec
        self._order = tuple(self.keys)
        self._columns = list(self.keys.values())
        numbers = fits and tuple(spec) == self._order and all(type(c) is _SpecColumn for c in self._columns)
        self._types = tuple(map(type, spec.values())) if numbers else None
        for key, column in self.keys.items():
            column.append(spec.get(key) if fits else None)

    def spec(self, i: int) -> dict | None:
        """Record `i`'s spec, as it was appended."""
        if self.none[i]:
            return None
        if i in self.other:
            return self.other[i]
        return {key: value for key, column in self.keys.items() if (value := column.value(i)) is not None}

    def block(self, first: int, count: int) -> list[dict | None]:
        """The specs of records first … first + count − 1: a column at a time where every record of the block
        holds every number key as the same kind of number (the common case), else one by one (`spec`)."""
        end = first + count
        if self.other or any(self.none[first:end]):
            return [self.spec(i) for i in range(first, end)]
        columns: list[list] = []
        for column in self.keys.values():
            kinds = np.array(column.kinds[first:end], dtype=np.int8)
            if kinds[0] == ABSENT or not (kinds == kinds[0]).all():
                return [self.spec(i) for i in range(first, end)]
            if isinstance(column, _ListColumn):
                columns.append([column.value(i) for i in range(first, end)])
                continue
            values = np.array(column.values[first:end])
            columns.append((values.astype(np.int64) if kinds[0] == INT else values).tolist())
        if not columns:
            return [{} for _ in range(count)]
        keys = tuple(self.keys)
        return [dict(zip(keys, row)) for row in zip(*columns)]

    def number_column(self, key: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, kinds) of spec key `key` (`record_table.RecordTable.spec_numbers`)."""
        column = self.keys.get(key)
        if not self.other:  # nothing to write over them: views of the kept columns, or of one zero (absent)
            if isinstance(column, _SpecColumn):
                return _read_only(column.values, np.float64), _read_only(column.kinds, np.int8)
            return np.broadcast_to(np.float64(0), (n,)), np.broadcast_to(np.int8(ABSENT), (n,))
        if isinstance(column, _SpecColumn):
            values = np.frombuffer(column.values, dtype=np.float64).copy()
            kinds = np.frombuffer(column.kinds, dtype=np.int8).copy()
        else:
            values, kinds = np.zeros(n), np.zeros(n, dtype=np.int8)
        for i, spec in self.other.items():
            value = spec.get(key)
            kinds[i] = spec_kind(value)
            if kinds[i] != ABSENT:
                values[i] = value
        return values, kinds

    def list_column(self, key: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, lengths) of the list-valued spec key `key` (`record_table.RecordTable.spec_lists`)."""
        column = self.keys.get(key)
        lengths = np.full(n, -1, dtype=np.int64)
        values = np.zeros(0)
        if isinstance(column, _ListColumn):
            ends = np.frombuffer(column.ends, dtype=np.int64)
            has = np.frombuffer(column.kinds, dtype=np.int8) == LIST
            lengths[has] = np.diff(ends, prepend=0)[has]
            values = np.frombuffer(column.values, dtype=np.int64)  # a view: no record is added while it is read
        others = {i: spec[key] for i, spec in self.other.items() if isinstance(spec.get(key), list)}
        if not others:
            return values, lengths
        values = values.astype(np.float64)
        rows = [values[e - n:e] if n >= 0 else values[:0]
                for e, n in zip(np.cumsum(np.maximum(lengths, 0)).tolist(), lengths.tolist())]
        for i, value in others.items():
            rows[i] = np.array([x if spec_kind(x) != ABSENT else 0.0 for x in value], dtype=np.float64)
            lengths[i] = len(value)
        return (np.concatenate(rows) if rows else values), lengths


def _read_only(buffer: array, dtype) -> np.ndarray:
    """A view of a kept column, for reading while no record is added (`RecordColumns.table`)."""
    view = np.frombuffer(buffer, dtype=dtype)
    view.flags.writeable = False
    return view
