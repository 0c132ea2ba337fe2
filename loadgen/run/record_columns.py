"""A cell's kept records as columns: a few bytes of memory a request instead of ~800 as `Record` objects.

A long cell keeps every measured record until its summary (its per-request figures are exact). As objects,
a record costs its slots, an int object per time stamp, its request id and its `spec` dict; here every integer
field (22 of them) is one int64 of a row-major array, the fields that most records share (run, cell, phase,
outcome, error, category, …) are stored once with the records that differ, the chunks as a flag, the request
id only where it is not the one its cell, sequence number and attempt give (`record.request_id_for`), and the
server's `spec` numbers in one float column per key (ints stay ints). The integer rows go to a temporary file
`ROWS_AT_ONCE` at a time (176 bytes a request on disk; in memory only the last rows, and ~20 bytes a request
for the flags and the spec columns). `records()` gives back equal `Record` objects for the summary, reading
the rows back a block at a time.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import fields
from operator import attrgetter, itemgetter

import numpy as np

from loadgen.record import CHUNKS_ELSEWHERE, Record, request_id_for, request_id_prefix

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
ROWS_AT_ONCE = 1024  # integer rows held in memory before they are written to the file (176 KiB)
_K = len(INT_FIELDS)
# a record's values in `Record` field order, from its int row + the shared fields + (request id, chunk lists, spec)
_LATER = ("request_id", "chunk_tokens", "chunk_gaps_ns", "spec")
_SOURCES = INT_FIELDS + SHARED_FIELDS + _LATER
_IN_ORDER = itemgetter(*(_SOURCES.index(f.name) for f in fields(Record)))
_RUN, _CELL = SHARED_FIELDS.index("run_id"), SHARED_FIELDS.index("cell")
_SEQ, _ATTEMPT = INT_FIELDS.index("seq"), INT_FIELDS.index("attempt")
_POOLED = tuple(INT_FIELDS.index(name) for name in ("prompt_tokens", "completion_tokens", "cached_tokens", "chunks",
                                                     "reasoning_tokens"))
_SAME_AS = tuple((INT_FIELDS.index(a), INT_FIELDS.index(b)) for a, b in (
    ("t_first_token_ns", "t_first_byte_ns"), ("t_first_answer_ns", "t_first_token_ns"),
    ("t_last_token_ns", "t_end_ns"), ("t_first_reasoning_ns", "t_first_token_ns")))


class _SpecColumn:
    __slots__ = ("values", "kinds")

    def __init__(self):
        self.values = array("d")
        self.kinds = array("b")


class RecordColumns:
    """Records appended one by one, held as columns, their integer rows on disk (module docstring)."""

    def __init__(self):
        self.n = 0
        self.ints = array("q")  # row-major, len(INT_FIELDS) values a record: the rows not yet in `_file`
        self._file = tempfile.TemporaryFile(prefix="loadgen-rows-")
        self._on_disk = 0  # rows written to `_file`
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
        self._common_prefix: str | None = None

    def __len__(self) -> int:
        return self.n

    def append(self, r: Record) -> None:
        i = self.n
        ints = _INTS_OF(r)
        self.ints.extend(ints if None not in ints else [NONE if v is None else v for v in ints])
        if len(self.ints) >= ROWS_AT_ONCE * _K:
            self._file.write(self.ints.tobytes())
            self._on_disk += len(self.ints) // _K
            self.ints = array("q")
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
            value = spec.get(key) if numbers and spec is not None else None
            column.values.append(0.0 if value is None else float(value))
            column.kinds.append(ABSENT if value is None else KIND[type(value)])

    def _blocks(self) -> Iterator[tuple[int, list[list]]]:
        """(first row, its rows as lists, None for NONE) for every row, ROWS_AT_ONCE rows at a time: from the
        file, then the rows still in memory."""
        self._file.flush()
        self._file.seek(0)
        try:
            for first in range(0, self._on_disk, ROWS_AT_ONCE):
                block = array("q")
                block.frombytes(self._file.read(8 * _K * min(ROWS_AT_ONCE, self._on_disk - first)))
                yield first, _rows(block)
        finally:
            self._file.seek(0, 2)
        yield self._on_disk, _rows(self.ints)

    def _record(self, i: int, row: list, spec: dict | None) -> Record:
        """Record `i` from its int row (`_blocks`) and its spec."""
        state = self.chunks[i]
        if state == OWN:
            chunk_tokens, chunk_gaps = self.own_chunks[i]
        else:
            chunk_gaps = CHUNKS_ELSEWHERE
            chunk_tokens = CHUNKS_ELSEWHERE if state == ELSEWHERE else None
        shared = self.differ.get(i, self.common)
        assert shared is not None  # set by the first record added
        request_id = self.request_ids.get(i)
        if request_id is None:
            request_id = self._prefix(shared) + f"{row[_SEQ]}" + (f"-a{row[_ATTEMPT]}" if row[_ATTEMPT] else "")
        return Record(*_IN_ORDER(row + list(shared) + [request_id, chunk_tokens, chunk_gaps, spec]))

    def _prefix(self, shared: tuple) -> str:
        """`record.request_id_prefix` of the records that share `shared` (the common ones: made once)."""
        if shared is not self.common:
            return request_id_prefix(shared[_RUN], shared[_CELL])
        if self._common_prefix is None:
            self._common_prefix = request_id_prefix(shared[_RUN], shared[_CELL])
        return self._common_prefix

    def record(self, i: int) -> Record:
        """Record `i` as it was appended."""
        return next(self.iter_records(i, i + 1))

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

    def _specs(self, first: int, count: int) -> list[dict | None]:
        """The specs of records first … first + count − 1: a column at a time where every record of the block
        holds every key as the same kind of number (the common case), else one by one (`_spec`)."""
        end = first + count
        if self.spec_other or any(self.spec_none[first:end]):
            return [self._spec(i) for i in range(first, end)]
        columns = []
        for column in self.spec_keys.values():
            kinds = np.array(column.kinds[first:end], dtype=np.int8)
            if kinds[0] == ABSENT or not (kinds == kinds[0]).all():
                return [self._spec(i) for i in range(first, end)]
            values = np.array(column.values[first:end])
            columns.append((values.astype(np.int64) if kinds[0] == INT else values).tolist())
        if not columns:
            return [{} for _ in range(count)]
        keys = tuple(self.spec_keys)
        return [dict(zip(keys, row)) for row in zip(*columns)]

    def iter_records(self, start: int = 0, stop: int | None = None) -> Iterator[Record]:
        """Records start…stop − 1 (all by default) as they were appended, one block of rows read at a time."""
        stop = self.n if stop is None else stop
        for first, rows in self._blocks():
            lo, hi = max(start - first, 0), min(stop - first, len(rows))
            if lo < hi:
                specs = self._specs(first + lo, hi - lo)
                for j in range(lo, hi):
                    yield self._record(first + j, rows[j], specs[j - lo])

    def records(self) -> list[Record]:
        return list(self.iter_records())

    def close(self) -> None:
        self._file.close()


def _rows(ints: array) -> list[list]:
    """Rows of len(INT_FIELDS) values from a row-major array, NONE made None (in one pass of numpy). Equal
    values share one int object where they are often equal (a count most requests share, the first token's
    time that is the first byte's): ~130 bytes less a rebuilt record."""
    if not ints:
        return []
    table = np.frombuffer(ints, dtype=np.int64).reshape(-1, _K)
    values = table.astype(object)
    for k in _POOLED:
        pool, inverse = np.unique(table[:, k], return_inverse=True)
        if len(pool) * 4 < len(table):
            values[:, k] = pool.astype(object)[inverse]
    for k, like in _SAME_AS:
        same = table[:, k] == table[:, like]
        values[same, k] = values[same, like]
    values[table == NONE] = None
    return values.tolist()
