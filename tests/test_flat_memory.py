"""Memory that stays flat in a long cell: the kept records' integer rows go to disk a block at a time and come
back equal, and what stays in memory per request is a few bytes, whatever the number of requests."""

from __future__ import annotations

import copy
import sys

import pytest

from loadgen.record import CHUNKS_ELSEWHERE, request_id_for
from loadgen.run import record_columns
from loadgen.run.chunk_spill import CellRecords
from loadgen.run.record_columns import RecordColumns
from tests.test_bounded_memory import _closed_loop

pytestmark = pytest.mark.unit


def test_rows_written_to_disk_come_back_as_the_records_they_were(monkeypatch):
    monkeypatch.setattr(record_columns, "ROWS_AT_ONCE", 7)
    recs = _closed_loop(100)
    recs[3].spec, recs[9].t_first_token_ns, recs[50].request_id = None, None, "mine"
    columns = RecordColumns()
    for r in copy.deepcopy(recs):
        columns.append(r)
    try:
        assert columns._on_disk == 98 and len(columns.ints) == 2 * len(record_columns.INT_FIELDS)
        assert columns.records() == recs
        assert columns.record(50) == recs[50] and columns.record(99) == recs[99]
        assert list(columns.iter_records(5, 12)) == recs[5:12]
        assert columns.records() == recs  # read again: the file is read from its start each time
    finally:
        columns.close()


def test_memory_per_kept_request_is_a_few_bytes():
    recs = [r for r in _closed_loop(120) if r.ok][:100]
    columns = RecordColumns()
    try:
        for block in range(40):  # 4,000 requests: the rows of all but the last block are on disk
            for r in copy.deepcopy(recs):
                r.seq += 100 * block
                r.request_id = request_id_for(r.run_id, r.cell, r.seq, r.attempt)
                r.chunk_gaps_ns = r.chunk_tokens = CHUNKS_ELSEWHERE  # as a cell keeps an ok one: moved to the spill
                columns.append(r)
        in_memory = (sys.getsizeof(columns.ints) + sys.getsizeof(columns.chunks) + sys.getsizeof(columns.specs.none)
                     + sum(sys.getsizeof(c.values) + sys.getsizeof(c.kinds) for c in columns.specs.keys.values()))
        assert columns._on_disk >= 3 * record_columns.ROWS_AT_ONCE
        assert not columns.request_ids and not columns.differ and not columns.own_chunks
        assert sys.getsizeof(columns.ints) <= 8 * len(record_columns.INT_FIELDS) * record_columns.ROWS_AT_ONCE + 4096
        assert (in_memory - sys.getsizeof(columns.ints)) / 4000 < 40  # flags and spec columns: ~20 bytes a request
    finally:
        columns.close()


def test_the_kept_records_are_rebuilt_once_while_none_is_added():
    kept = CellRecords()
    try:
        for r in copy.deepcopy(_closed_loop(100)):
            kept.keep(r)
        first = kept.records()
        assert kept.records() is first  # an open-loop cell's lateness, then its summary: one rebuild
        late = copy.deepcopy(first[0])
        late.seq, late.request_id = 1000, "late"
        kept.keep(late)
        again = kept.records()
        assert again is not first and again[:-1] == first and again[-1].request_id == "late"
    finally:
        kept.close()


def test_a_constant_column_is_one_value_and_spec_numbers_are_views():
    # what the summary holds to its end: a field no record has, a fixed count and one outcome cost no memory a
    # request, and a column that varies is whole; the views of one value and of the kept arrays are read-only
    recs = [r for r in _closed_loop(60) if r.ok][:50]
    for r in recs:
        r.cached_tokens, r.spec = None, {"spec_verify_ct": r.seq + 1}
    columns = RecordColumns()
    try:
        for r in copy.deepcopy(recs):
            columns.append(r)
        table = columns.table()
        cached, seq = table.ints("cached_tokens"), table.ints("seq")
        assert cached.strides == (0,) and set(cached.tolist()) == {record_columns.NONE}
        assert seq.strides == (8,) and seq.tolist() == [r.seq for r in recs]
        outcome = table.labels("outcome")
        assert outcome.strides == (0,) and outcome.tolist() == ["ok"] * len(recs)
        steps, kinds = table.spec_numbers("spec_verify_ct")
        assert steps.base is not None and steps.tolist() == [r.seq + 1 for r in recs]
        absent, absent_kinds = table.spec_numbers("draft_n")
        assert absent.strides == (0,) and not absent_kinds.any()
        for column in (cached, outcome, steps, absent):
            with pytest.raises(ValueError):
                column[0] = column[1]
        assert table.where(table.ints("seq") % 2 == 0).ints("cached_tokens").tolist() == [record_columns.NONE] * 25
    finally:
        columns.close()
