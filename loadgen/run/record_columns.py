"""A cell's kept records as columns: a few bytes of memory a request instead of ~800 as `Record` objects.

A long cell keeps every measured record until its summary (its per-request figures are exact). As objects,
a record costs its slots, an int object per time stamp, its request id and its `spec` dict; here every integer
field (22 of them) is one int64 of a row-major array, the fields that most records share (run, cell, phase,
outcome, error, category, …) are stored once with the records that differ, the chunks as a flag, the request
id only where it is not the one its cell, sequence number and attempt give (`record.request_id_for`), and the
server's `spec` as columns (`spec_columns.SpecColumns`). The integer rows go to a temporary file
`ROWS_AT_ONCE` at a time (176 bytes a request on disk; in memory only the last rows, and ~20 bytes a request
for the flags and the spec columns). The summary reads them as a `metrics.record_table.RecordTable` (`table()`:
columns read from the rows, only the few records a figure reads whole built); `records()` gives back equal
`Record` objects, reading the rows back a block at a time.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import fields
from operator import attrgetter, itemgetter

import numpy as np

from loadgen.metrics.record_table import NONE, RecordTable
from loadgen.record import CHUNKS_ELSEWHERE, Record, request_id_prefix, request_id_tail
from loadgen.run.spec_columns import SpecColumns

INT_FIELDS = tuple(f.name for f in fields(Record) if f.type in ("int", "int | None"))  # one int64 each
CHUNK_FIELDS = ("chunk_tokens", "chunk_gaps_ns")
SHARED_FIELDS = tuple(f.name for f in fields(Record)
                      if f.name not in INT_FIELDS + CHUNK_FIELDS + ("request_id", "spec"))
_INTS_OF = attrgetter(*INT_FIELDS)
_NONE_FOR = {None: NONE}  # `.get(v, v)`: NONE for None, else the value itself
_SHARED_OF = attrgetter(*SHARED_FIELDS)
ELSEWHERE, ELSEWHERE_NO_COUNTS, OWN = 0, 1, 2  # where a record's chunk lists are
ROWS_AT_ONCE = 1024  # integer rows held in memory before they are written to the file (176 KiB)
COLUMN_ROWS = 8192  # rows read back at once to take a column from them (1.4 MiB)
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


class RecordColumns:
    """Records appended one by one, held as columns, their integer rows on disk (module docstring)."""

    def __init__(self) -> None:
        self.n = 0
        self.ints = array("q")  # row-major, len(INT_FIELDS) values a record: the rows not yet in `_file`
        self._file = tempfile.TemporaryFile(prefix="loadgen-rows-")
        self._on_disk = 0  # rows written to `_file`
        self.common: tuple | None = None  # the first record's SHARED_FIELDS
        self.differ: dict[int, tuple] = {}  # the SHARED_FIELDS of records that differ from `common`
        self.chunks = bytearray()  # ELSEWHERE | ELSEWHERE_NO_COUNTS | OWN
        self.own_chunks: dict[int, tuple] = {}  # (chunk_tokens, chunk_gaps_ns) of the OWN ones
        self.request_ids: dict[int, str] = {}
        self.specs = SpecColumns()  # the records' `spec` dicts
        self._common_prefix: str | None = None

    def __len__(self) -> int:
        return self.n

    def append(self, r: Record) -> None:
        i = self.n
        values = _INTS_OF(r)
        self.ints.fromlist(list(map(_NONE_FOR.get, values, values)))  # fromlist: half `extend`'s time; the map: no
        # bytecode a value
        if len(self.ints) >= ROWS_AT_ONCE * _K:
            self._file.write(self.ints.tobytes())
            self._on_disk += len(self.ints) // _K
            self.ints = array("q")
        shared = _SHARED_OF(r)
        if self.common is None:
            self.common = shared
        elif shared != self.common:
            self.differ[i] = shared
        else:
            shared = self.common  # its request id prefix is made once (`_prefix`)
        if r.chunk_gaps_ns is CHUNKS_ELSEWHERE:
            self.chunks.append(ELSEWHERE if r.chunk_tokens is CHUNKS_ELSEWHERE else ELSEWHERE_NO_COUNTS)
        else:
            self.chunks.append(OWN)
            self.own_chunks[i] = (r.chunk_tokens, r.chunk_gaps_ns)
        if r.request_id != self._prefix(shared) + request_id_tail(r.seq, r.attempt):
            self.request_ids[i] = r.request_id
        self.specs.append(i, r.spec)
        self.n += 1

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
            request_id = self._prefix(shared) + request_id_tail(row[_SEQ], row[_ATTEMPT])
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

    def iter_records(self, start: int = 0, stop: int | None = None) -> Iterator[Record]:
        """Records start…stop − 1 (all by default) as they were appended, one block of rows read at a time."""
        stop = self.n if stop is None else stop
        for first, rows in self._blocks():
            lo, hi = max(start - first, 0), min(stop - first, len(rows))
            if lo < hi:
                specs = self.specs.block(first + lo, hi - lo)
                for j in range(lo, hi):
                    yield self._record(first + j, rows[j], specs[j - lo])

    def records(self) -> list[Record]:
        return list(self.iter_records())

    # the `metrics.record_table.ColumnSource` of the summary: columns straight from the rows, no record built

    def table(self) -> RecordTable:
        """The kept records as a `RecordTable` (its columns read from here when a figure first asks), for reading
        while no record is added (a list column is served as a view of the rows' own array)."""
        return RecordTable(self)

    def int_columns(self, names: Sequence[str]) -> list[np.ndarray]:
        """Integer fields `names` of every record (int64, `NONE` for None), read from the rows together, a block at
        a time."""
        ks = [INT_FIELDS.index(name) for name in names]
        out = [np.empty(self.n, dtype=np.int64) for _ in names]
        for first, block in self._int_blocks():
            for column, k in zip(out, ks):
                column[first:first + len(block)] = block[:, k]
        return [_one_value(c) for c in out]

    def _int_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, its rows as an int64 array of len(INT_FIELDS) columns), `COLUMN_ROWS` rows at a time."""
        self._file.flush()
        self._file.seek(0)
        try:
            for first in range(0, self._on_disk, COLUMN_ROWS):
                count = min(COLUMN_ROWS, self._on_disk - first)
                yield first, np.frombuffer(self._file.read(8 * _K * count), dtype=np.int64).reshape(-1, _K)
        finally:
            self._file.seek(0, 2)
        yield self._on_disk, np.frombuffer(self.ints, dtype=np.int64).reshape(-1, _K)

    def label_column(self, name: str) -> np.ndarray:
        """Shared field `name` of every record, as an object array."""
        k = SHARED_FIELDS.index(name)
        one = np.empty(1, dtype=object)  # the value itself, whatever it is (a tuple is not spread over rows)
        one[0] = None if self.common is None else self.common[k]
        if not self.differ:
            return np.broadcast_to(one, (self.n,))  # one value seen n times, as `_one_value`
        out = np.empty(self.n, dtype=object)
        out[:] = one
        for i, shared in self.differ.items():
            out[i] = shared[k]
        return out

    def spec_number_column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, kinds) of spec key `key` (`record_table.RecordTable.spec_numbers`)."""
        return self.specs.number_column(key, self.n)

    def spec_list_column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, lengths) of the list-valued spec key `key` (`record_table.RecordTable.spec_lists`)."""
        return self.specs.list_column(key, self.n)

    def label_at(self, name: str, row: int) -> object:
        """Shared field `name` of record `row`."""
        shared = self.differ.get(row, self.common)
        assert shared is not None  # set by the first record added
        return shared[SHARED_FIELDS.index(name)]

    def chunks_elsewhere_column(self) -> np.ndarray:
        """True where the record's chunk lists were moved out (`record.chunks_elsewhere`)."""
        return np.frombuffer(self.chunks, dtype=np.uint8) != OWN

    def records_at(self, rows: np.ndarray) -> list[Record]:
        """The records at `rows` (ascending), whole: only their rows read back."""
        out = []
        for i in rows.tolist():
            if i < self._on_disk:
                self._file.flush()
                self._file.seek(8 * _K * i)
                row = array("q")
                row.frombytes(self._file.read(8 * _K))
                self._file.seek(0, 2)
            else:
                row = self.ints[(i - self._on_disk) * _K:(i - self._on_disk + 1) * _K]
            out.append(self._record(i, _rows(row)[0], self.specs.spec(i)))
        return out

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


def _one_value(column: np.ndarray) -> np.ndarray:
    """A column whose rows all hold one value (a count no record has: cached_tokens of a server that does not
    say; the attempt, the repeat, a fixed max_tokens) as that value seen n times, a read-only view: the summary
    holds its columns to the end, and most of a cell's fields are constant."""
    if len(column) and (column == column[0]).all():
        return np.broadcast_to(column[:1].copy(), column.shape)  # a copy: a view would hold the whole column
    return column
