"""A cell's summary from columns is the summary the record-by-record formulas gave.

`tests/fixtures/summary_golden/build_cell.json` holds `build_cell`'s output for every case of
`tests/summary_cases.py`, frozen while every figure was still computed one record at a time. The result built
today from the records, and from the columns a long cell keeps while it runs (`run.chunk_spill.CellRecords`:
rows on disk, chunks folded and spilled), must be that output, every figure equal to the last bit. And the
kept cell's summary must build no `Record` but the few a figure reads whole.
"""

from __future__ import annotations

import copy

import orjson
import pytest

from loadgen.record import Record
from loadgen.results.build_cell import build_cell
from loadgen.run.chunk_spill import CellRecords
from tests.conftest import ROOT
from tests.summary_cases import cases

pytestmark = pytest.mark.unit

GOLDEN = orjson.loads((ROOT / "tests/fixtures/summary_golden/build_cell.json").read_bytes())
CASES = {name: (recs, kw) for name, recs, kw in cases()}


def _json(result) -> dict:
    return orjson.loads(orjson.dumps(result.to_json(), option=orjson.OPT_SERIALIZE_NUMPY))


def _kept(recs: list[Record], keep_chunks: bool = False) -> CellRecords:
    kept = CellRecords(keep_chunks=keep_chunks)
    for r in copy.deepcopy(recs):
        kept.keep(r)
    kept.finish()
    return kept


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_summary_of_records_is_the_frozen_one(name):
    recs, kw = CASES[name]
    assert _json(build_cell(recs[0].cell, recs, **kw)) == GOLDEN[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_summary_of_kept_columns_is_the_frozen_one(name):
    recs, kw = CASES[name]
    kept = _kept(recs)
    try:
        result = build_cell(recs[0].cell, kept.table(), chunks=kept.fold, arrivals=kept.spill.arrivals, **kw)
    finally:
        kept.close()
    assert _json(result) == GOLDEN[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_kept_cell_is_summarised_without_rebuilding_its_records(name, monkeypatch):
    recs, kw = CASES[name]
    if "slo" in kw:
        pytest.skip("latency targets judge each request whole (the live tally's formula)")
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
