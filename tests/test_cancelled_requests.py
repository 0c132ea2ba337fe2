"""Requests the client cut short (a second Ctrl-C, the end of --drain-timeout) are counted apart from failed
ones; a cell where nothing succeeded shows no accept length; and a resumed run drops the records of the cell
it throws away, as a sweep does (the one resume rule)."""

from __future__ import annotations

import pathlib

import orjson
import pytest

from loadgen.files import read_json, write_json_atomic
from loadgen.metrics.source_result import SourceResult
from loadgen.names import Outcome
from loadgen.record import CellKey, Record
from loadgen.report.table import CANCELLED_LEGEND, row, table
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_status import failed_fraction, problem
from loadgen.results.document import requests_path
from tests.cells import typed

pytestmark = pytest.mark.unit

MS = 1_000_000
FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "results-0.1"
# what the server said during the cell: its counters put the accept length at 3.9
COUNTERS = SourceResult("server_metrics", "accept_length", True, {"per_source": {"counters": 3.9}})


def _record(seq: int, outcome: Outcome) -> Record:
    """Sent at seq·10 ms; an ok one streams 11 tokens in 11 chunks, a cancelled one was streaming 3 chunks."""
    t0 = seq * 10 * MS
    ok = outcome is Outcome.OK
    return Record("r", CellKey(60, 64), seq, t_intended_ns=t0, t_sent_ns=t0, t_first_byte_ns=t0 + 4 * MS,
                  t_first_token_ns=t0 + 5 * MS, t_last_token_ns=t0 + 15 * MS if ok else None, t_end_ns=t0 + 15 * MS,
                  outcome=outcome, prompt_tokens=60, completion_tokens=11 if ok else None, chunks=11 if ok else 3,
                  chunk_tokens=[1] * 11 if ok else [3, 3, 3], chunk_gaps_ns=[MS] * 10 if ok else [MS, MS],
                  error=None if ok else "cancelled before the response ended")


def test_a_double_ctrl_c_cell_shows_its_cancelled_requests_and_no_accept_length():
    result = build_cell(CellKey(60, 64), [_record(i, Outcome.CANCELLED) for i in range(64)], [COUNTERS])
    cell = result.to_json()
    assert cell["requests"] == {"ok": 0, "failed": 0, "cancelled": 64, "by_outcome": {"cancelled": 64}}
    assert cell["error"] == "no request succeeded (64 cancelled)"
    assert cell["accept_length"]["value"] is None and cell["accept_length"]["source"] is None
    assert cell["accept_length"]["per_source"]["counters"] == 3.9  # what the server said is kept, not shown
    shown = row(result)
    assert " 0/0+64c " in shown and " 3.90 " not in shown and "failed" not in shown.split("FAILED:")[0]
    assert CANCELLED_LEGEND in table([result])


def test_cancelled_requests_still_count_against_the_failed_fraction_but_are_named_as_cancelled():
    recs = [_record(i, Outcome.OK) for i in range(60)] + [_record(60 + i, Outcome.CANCELLED) for i in range(4)]
    result = build_cell(CellKey(60, 64), recs, [COUNTERS])
    cell = result.to_json()
    assert (cell["requests"]["failed"], cell["requests"]["cancelled"]) == (0, 4)
    assert failed_fraction(result) == 4 / 64
    assert problem(result) == ("4 of 64 requests were cancelled (6.2% > 0.01 --max-failed-fraction): 4 cancelled")
    assert cell["accept_length"]["value"] == 3.9
    both = build_cell(CellKey(60, 64), recs + [_record(70, Outcome.TIMEOUT)])
    assert problem(both).startswith("5 of 65 requests failed or were cancelled (1 failed, 4 cancelled) (7.7% > ")


def test_a_file_of_an_earlier_loadgen_counts_cancelled_in_failed_and_is_judged_as_before():
    old = typed({"status": "ok", "requests": {"ok": 60, "failed": 4, "by_outcome": {"ok": 60, "cancelled": 4}}})
    assert failed_fraction(old) == 4 / 64
    assert problem(old).startswith("4 of 64 requests failed (6.2% > 0.01")


def test_a_resumed_run_drops_the_records_of_the_cell_it_measures_again(tmp_path, capsys):
    from loadgen.cli.resume import Resume
    from loadgen.cli.run_config import config_from_args
    from loadgen.cli.run_options import run_parser

    doc = read_json(str(FIXTURES / "closed.json"))
    first, stopped = doc["cells"]
    stopped |= {"requests_not_sent": 3, "warnings": ["stopped early (interrupted by SIGINT): 3 of 8 measured "
                                                     "requests not sent"]}
    out = tmp_path / "run.json"
    write_json_atomic(str(out), doc)
    rows = [{"run_id": doc["run_id"], "cell": {"context_tokens": 60, "concurrency": c}, "seq": i}
            for c, n in ((1, 8), (4, 5)) for i in range(n)]
    records = pathlib.Path(requests_path(str(out)))
    records.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows) + b'{"run_id": "torn')
    argv = ["--concurrency", "1,4", "--contexts", "60", "--max-tokens", "32", "--requests-per-cell", "8",
            "--out", str(out)]
    resume = Resume(config_from_args(run_parser().parse_args(argv)))
    assert resume.remaining == [CellKey(60, 4)]
    kept = [orjson.loads(line) for line in records.read_bytes().splitlines()]
    assert [(r["cell"]["concurrency"], r["seq"]) for r in kept] == [(1, i) for i in range(8)]
    said = " ".join(ln.strip() for ln in capsys.readouterr().err.splitlines())  # wrapped at 120 columns
    assert f"{records}: the kept cells' records stay, the new ones are appended; dropped 5 records of cells that " \
           "are measured again" in said
