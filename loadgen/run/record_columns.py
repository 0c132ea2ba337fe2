"""A cell's kept records as columns: ~150 bytes a request instead of ~800 as `Record` objects.

A long cell keeps every measured record until its summary (its per-request figures are exact). As objects,
a record costs its slots, an int object per time stamp, its request id and its `spec` dict; here every integer
field is one int64 of a column, a field that most records share (run, cell, phase, outcome, error, category,
the chunk fields) is stored once with the records that differ from it, the request id only where it is not the
one its cell, sequence number and attempt give (`record.request_id_for`), and the server's `spec` numbers
in one float column per key (ints stay ints). `records()` gives back equal `Record` objects for the summary.
"""

from __future__ import annotations

from array import array
from dataclasses import fields
from operator import attrgetter

from loadgen.record import Record, request_id_for

INT_FIELDS = ("seq", "t_intended_ns", "t_sent_ns", "t_first_byte_ns", "t_first_token_ns", "t_last_token_ns",
              "t_end_ns", "status", "prompt_tokens", "completion_tokens", "cached_tokens", "chunks", "worker",
              "attempt", "retried_on_new_connection")
SHARED_FIELDS = tuple(f.name for f in fields(Record) if f.name not in INT_FIELDS + ("request_id", "spec"))
BY_IDENTITY = frozenset({"chunk_tokens", "chunk_gaps_ns"})  # `CHUNKS_ELSEWHERE` is not any empty array
_INTS_OF = attrgetter(*INT_FIELDS)
_SHARED_OF = attrgetter(*SHARED_FIELDS)
NONE = -(1 << 63)  # an int field that is None
ABSENT, INT, FLOAT = 0, 1, 2  # how a spec key is held for one record


class _Shared:
    """One field's value common to most records, with the records that differ from it."""

    __slots__ = ("common", "differ")

    def __init__(self):
        self.common: object = None
        self.differ: dict[int, object] = {}


class _SpecColumn:
    __slots__ = ("values", "kinds")

    def __init__(self):
        self.values = array("d")
        self.kinds = array("b")


class RecordColumns:
    """Records appended one by one, held as columns (module docstring)."""

    def __init__(self):
        self.n = 0
        self.ints = {name: array("q") for name in INT_FIELDS}
        self.shared = {name: _Shared() for name in SHARED_FIELDS}
        self._int_columns = list(self.ints.values())
        self._shared_columns = list(self.shared.values())
        self.request_ids: dict[int, str] = {}
        self.spec_keys: dict[str, _SpecColumn] = {}
        self.spec_none = array("b")  # 1 where spec is None
        self.spec_other: dict[int, dict] = {}  # a spec with values other than numbers, as it was

    def __len__(self) -> int:
        return self.n

    def append(self, r: Record) -> None:
        i = self.n
        for column, value in zip(self._int_columns, _INTS_OF(r)):
            column.append(NONE if value is None else value)
        for name, shared, value in zip(SHARED_FIELDS, self._shared_columns, _SHARED_OF(r)):
            if i == 0:
                shared.common = value
            elif value is not shared.common and (name in BY_IDENTITY or value != shared.common):
                shared.differ[i] = value
        if r.request_id != request_id_for(r.run_id, r.cell, r.seq, r.attempt):
            self.request_ids[i] = r.request_id
        self._append_spec(i, r.spec)
        self.n += 1

    def _append_spec(self, i: int, spec: dict | None) -> None:
        self.spec_none.append(spec is None)
        numbers = spec is not None and all(type(v) in (int, float) for v in spec.values())
        if spec is not None and not numbers:
            self.spec_other[i] = spec
        for key in spec or ():
            if key not in self.spec_keys:
                column = self.spec_keys[key] = _SpecColumn()
                column.values.extend([0.0] * i)
                column.kinds.extend([ABSENT] * i)
        for key, column in self.spec_keys.items():
            value = spec.get(key) if numbers else None
            column.values.append(0.0 if value is None else float(value))
            column.kinds.append(ABSENT if value is None else INT if type(value) is int else FLOAT)

    def record(self, i: int) -> Record:
        """Record `i` as it was appended."""
        kw = {name: (None if column[i] == NONE else column[i]) for name, column in self.ints.items()}
        for name, shared in self.shared.items():
            kw[name] = shared.differ.get(i, shared.common)
        kw["request_id"] = self.request_ids.get(i) or request_id_for(kw["run_id"], kw["cell"], kw["seq"],
                                                                     kw["attempt"])
        kw["spec"] = self._spec(i)
        return Record(**kw)

    def _spec(self, i: int) -> dict | None:
        if self.spec_none[i]:
            return None
        if i in self.spec_other:
            return self.spec_other[i]
        spec = {}
        for key, column in self.spec_keys.items():
            kind = column.kinds[i]
            if kind != ABSENT:
                spec[key] = int(column.values[i]) if kind == INT else column.values[i]
        return spec

    def records(self) -> list[Record]:
        return [self.record(i) for i in range(self.n)]
