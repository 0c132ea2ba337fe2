"""A cell's kept records as columns: ~200 bytes a request instead of ~800 as `Record` objects.

A long cell keeps every measured record until its summary (its per-request figures are exact). As objects,
a record costs its slots, an int object per time stamp, its request id and its `spec` dict; here every integer
field (22 of them) is one int64 of a row-major array, the fields that most records share (run, cell, phase,
outcome, error, category, …) are stored once with the records that differ, the chunks as a flag, the request
id only where it is not the one its cell, sequence number and attempt give (`record.request_id_for`), and the
server's `spec` numbers in one float column per key (ints stay ints). `records()` gives back equal `Record` objects for the summary.
"""

from __future__ import annotations

from array import array
from dataclasses import fields
from operator import attrgetter

from loadgen.record import CHUNKS_ELSEWHERE, Record, request_id_for

INT_FIELDS = tuple(f.name for f in fields(Record) if f.type in ("int", "int | None"))  # one int64 each
CHUNK_FIELDS = ("chunk_tokens", "chunk_gaps_ns")
SHARED_FIELDS = tuple(f.name for f in fields(Record)
                      if f.name not in INT_FIELDS + CHUNK_FIELDS + ("request_id", "spec"))
_INTS_OF = attrgetter(*INT_FIELDS)
_SHARED_OF = attrgetter(*SHARED_FIELDS)
NONE = -(1 << 63)  # an int field that is None
ABSENT, INT, FLOAT = 0, 1, 2  # how a spec key is held for one record
KIND = {int: INT, float: FLOAT}
ELSEWHERE, ELSEWHERE_NO_COUNTS, OWN = 0, 1, 2  # where a record's chunk lists are


class _SpecColumn:
    __slots__ = ("values", "kinds")

    def __init__(self):
        self.values = array("d")
        self.kinds = array("b")


class RecordColumns:
    """Records appended one by one, held as columns (module docstring)."""

    def __init__(self):
        self.n = 0
        self.ints = array("q")  # row-major: len(INT_FIELDS) values a record
        self.common: tuple | None = None  # the first record's SHARED_FIELDS
        self.differ: dict[int, tuple] = {}  # the SHARED_FIELDS of records that differ from `common`
        self.chunks = bytearray()  # ELSEWHERE | ELSEWHERE_NO_COUNTS | OWN
        self.own_chunks: dict[int, tuple] = {}  # (chunk_tokens, chunk_gaps_ns) of the OWN ones
        self.request_ids: dict[int, str] = {}
        self.spec_keys: dict[str, _SpecColumn] = {}
        self.spec_none = array("b")  # 1 where spec is None
        self.spec_other: dict[int, dict] = {}  # a spec with values other than numbers, as it was
        self._spec_order: tuple = ()  # the keys of the spec columns, in order
        self._spec_columns: list[_SpecColumn] = []

    def __len__(self) -> int:
        return self.n

    def append(self, r: Record) -> None:
        i = self.n
        ints = _INTS_OF(r)
        self.ints.extend(ints if None not in ints else [NONE if v is None else v for v in ints])
        shared = _SHARED_OF(r)
        if self.common is None:
            self.common = shared
        elif shared != self.common:
            self.differ[i] = shared
        if r.chunk_gaps_ns is CHUNKS_ELSEWHERE:
            self.chunks.append(ELSEWHERE if r.chunk_tokens is CHUNKS_ELSEWHERE else ELSEWHERE_NO_COUNTS)
        else:
            self.chunks.append(OWN)
            self.own_chunks[i] = (r.chunk_tokens, r.chunk_gaps_ns)
        if r.request_id != request_id_for(r.run_id, r.cell, r.seq, r.attempt):
            self.request_ids[i] = r.request_id
        self._append_spec(i, r.spec)
        self.n += 1

    def _append_spec(self, i: int, spec: dict | None) -> None:
        self.spec_none.append(spec is None)
        if spec is not None and tuple(spec) == self._spec_order:  # the common case: the keys of every column
            kinds = [KIND.get(type(v)) for v in spec.values()]
            if None not in kinds:
                for column, value, kind in zip(self._spec_columns, spec.values(), kinds):
                    column.values.append(value)
                    column.kinds.append(kind)
                return
        numbers = spec is not None and all(type(v) in KIND for v in spec.values())
        if spec is not None and not numbers:
            self.spec_other[i] = spec
        for key in spec or ():
            if key not in self.spec_keys:
                column = self.spec_keys[key] = _SpecColumn()
                column.values.extend([0.0] * i)
                column.kinds.extend([ABSENT] * i)
        self._spec_order = tuple(self.spec_keys)
        self._spec_columns = list(self.spec_keys.values())
        for key, column in self.spec_keys.items():
            value = spec.get(key) if numbers else None
            column.values.append(0.0 if value is None else float(value))
            column.kinds.append(ABSENT if value is None else KIND[type(value)])

    def record(self, i: int) -> Record:
        """Record `i` as it was appended."""
        k = len(INT_FIELDS)
        kw = {name: (None if v == NONE else v) for name, v in zip(INT_FIELDS, self.ints[i * k:(i + 1) * k])}
        kw.update(zip(SHARED_FIELDS, self.differ.get(i, self.common)))
        state = self.chunks[i]
        if state == OWN:
            kw["chunk_tokens"], kw["chunk_gaps_ns"] = self.own_chunks[i]
        else:
            kw["chunk_gaps_ns"] = CHUNKS_ELSEWHERE
            kw["chunk_tokens"] = CHUNKS_ELSEWHERE if state == ELSEWHERE else None
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
