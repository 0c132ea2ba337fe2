"""A cell's summary from columns is the summary the record-by-record formulas gave.

`tests/fixtures/summary_golden/build_cell.json` holds `build_cell`'s output for every case of
`tests/summary_cases.py`, frozen while every figure was still computed one record at a time. The result built
today from the records, and from the columns a long cell keeps while it runs (`run.chunk_spill.CellRecords`:
rows on disk, chunks folded and spilled), must be that output, and the two must be equal to the last bit. Against
the frozen output a float may differ in its last bits (`same_figures`): a weighted mean's Σ value·weight was a BLAS
dot product then (whose kernel is chosen for the CPU) and is numpy's pairwise sum now (`stats.weighted_sum`), up to
3 units of the last place apart here. And the kept cell's summary must build no `Record` but the few a figure
reads whole.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import orjson
import pytest

from loadgen.metrics.record_table import RecordTable
from loadgen.record import Record
from loadgen.results.build_cell import build_cell
from loadgen.run.chunk_spill import CellRecords
from loadgen.run.record_columns import INT_FIELDS, SHARED_FIELDS
from tests.conftest import ROOT
from tests.summary_cases import cases

pytestmark = pytest.mark.unit

GOLDEN = orjson.loads((ROOT / "tests/fixtures/summary_golden/build_cell.json").read_bytes())
CASES = {name: (recs, kw) for name, recs, kw in cases()}


def _json(result) -> dict:
    return orjson.loads(orjson.dumps(result.to_json(), option=orjson.OPT_SERIALIZE_NUMPY))


def same_figures(got, want, where: str = "") -> None:
    """`got` is `want`, a float within 4 units of its last place (how Σ value·weight is summed: module docstring)."""
    if type(got) is float and type(want) is float:
        assert abs(got - want) <= 4 * math.ulp(want), f"{where}: {got!r} != {want!r}"
    elif isinstance(got, dict) and isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            same_figures(got[key], want[key], f"{where}.{key}")
    elif isinstance(got, list) and isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            same_figures(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _kept(recs: list[Record], keep_chunks: bool = False) -> CellRecords:
    kept = CellRecords(keep_chunks=keep_chunks)
    for r in copy.deepcopy(recs):
        kept.keep(r)
    kept.finish()
    return kept


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_summary_of_records_is_the_frozen_one(name):
    recs, kw = CASES[name]
    same_figures(_json(build_cell(recs[0].cell, recs, **kw)), GOLDEN[name], name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_summary_of_kept_columns_is_the_frozen_one(name):
    recs, kw = CASES[name]
    kept = _kept(recs)
    try:
        result = build_cell(recs[0].cell, kept.table(), chunks=kept.fold, arrivals=kept.spill.arrivals, **kw)
    finally:
        kept.close()
    same_figures(_json(result), GOLDEN[name], name)
    assert _json(result) == _json(build_cell(recs[0].cell, recs, **kw))  # on one CPU, to the last bit


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_kept_cell_is_summarised_without_rebuilding_its_records(name, monkeypatch):
    recs, kw = CASES[name]
    kept = _kept(recs)
    built = []
    original = Record.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Record, "__init__", counting)
    try:
        build_cell(recs[0].cell, kept.table(), chunks=kept.fold, arrivals=kept.spill.arrivals, **kw)
    finally:
        kept.close()
    assert len(built) <= max(8, len(recs) // 10)  # those across the steady window's edges, read back whole


@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_columns_are_the_records_columns(name):
    """Every column the table serves from the kept rows equals the one read from the records themselves."""
    recs, _ = CASES[name]
    kept = _kept(recs)
    try:
        table, whole = kept.table(), RecordTable.of(recs)
        order = [r.seq for r in kept.table().records()]
        assert order == [r.seq for r in recs]  # kept in the order they ended
        for field in INT_FIELDS:
            assert table.ints(field).tolist() == whole.ints(field).tolist(), field
        for field in SHARED_FIELDS:
            assert table.labels(field).tolist() == whole.labels(field).tolist(), field
        keys = {k for r in recs if r.spec for k in r.spec}
        for key in keys:
            for got, want in zip(table.spec_numbers(key), whole.spec_numbers(key)):
                assert got.tolist() == want.tolist(), key
            for got, want in zip(table.spec_lists(key), whole.spec_lists(key)):
                assert got.tolist() == want.tolist(), key
        some = np.zeros(len(recs), dtype=bool)
        some[[0, len(recs) // 2, len(recs) - 1]] = True
        want = [r for r, chosen in zip(recs, some) if chosen]
        got = table.records(some)
        assert [(r.seq, r.spec, r.outcome, r.t_end_ns) for r in got] == \
            [(r.seq, r.spec, r.outcome, r.t_end_ns) for r in want]
    finally:
        kept.close()


def test_a_histogram_is_kept_as_a_column_not_as_its_dict():
    """SGLang's per-request spec (numbers and a list of ints) takes columns, not one dict a record."""
    recs, _ = CASES["sglang_spec_and_cache"]
    kept = _kept(recs)
    try:
        columns = kept.columns
        with_list = sum(1 for r in recs if r.spec and "spec_correct_drafts_histogram" in r.spec)
        assert with_list > 100
        assert not any("spec_correct_drafts_histogram" in s for s in columns.specs.other.values())
        assert [r.spec for r in columns.records()] == [r.spec for r in recs]
    finally:
        kept.close()


def test_a_subset_of_a_table_reads_its_own_rows_of_every_column():
    recs, _ = CASES["sglang_spec_and_cache"]
    kept = _kept(recs)
    try:
        for table in (kept.table(), RecordTable.of(recs)):
            mask = np.array([i % 3 != 1 for i in range(len(recs))])
            part = table.where(mask).ok()
            want = [r for r, chosen in zip(recs, mask) if chosen and r.ok]
            assert part.ints("t_end_ns").tolist() == [r.t_end_ns for r in want]
            values, lengths = part.spec_lists("spec_correct_drafts_histogram")
            lists = [r.spec.get("spec_correct_drafts_histogram") if r.spec else None for r in want]
            assert lengths.tolist() == [len(x) if isinstance(x, list) else -1 for x in lists]
            assert values.tolist() == [float(v) for x in lists if isinstance(x, list) for v in x]
            numbers, kinds = part.spec_numbers("spec_verify_ct")
            assert [v if k else None for v, k in zip(numbers.tolist(), kinds.tolist())] == \
                [r.spec.get("spec_verify_ct") if r.spec else None for r in want]
    finally:
        kept.close()
