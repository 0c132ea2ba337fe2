"""Failed requests make a failed cell: more failed + cancelled than --max-failed-fraction of the scheduled
requests fails the cell (exit 1, the reason in the note and the JSON); fewer are shown in the note and counted.
Faults come from the real simulator's --http-error-rate; every count is checked against its truth."""

from __future__ import annotations

import pytest

from loadgen.results.cell_result import from_json
from loadgen.results.cell_status import failure_note, problem, usable
from tests.cells import typed
from tests.conftest import run_loadgen
from tests.faults_util import assert_accounted, outputs, wait_truth

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

ARGS = ("--concurrency", "4", "--contexts", "60", "--max-tokens", "32", "--requests-per-cell", "32",
        "--server-metrics", "off")


def measured_failures(sim, records: list[dict]) -> int:
    """How many measured requests the simulator itself answered with its injected error."""
    truth = wait_truth(sim, lambda rows: len(rows) >= len(records))
    return sum(1 for r in records if r["phase"] == "measure" and "http_error" in truth[r["request_id"]]["faults"])


@pytest.mark.sim
@pytest.mark.parametrize("limit,status,code", [(None, "failed", 1), ("0.9", "ok", 0)], ids=["default", "0.9"])
def test_a_cell_with_too_many_failures_is_failed(tmp_path, sim_factory, limit, status, code):
    sim = sim_factory("--speed", "8", "--http-error-rate", "0.25")
    out = tmp_path / "r.json"
    run = run_loadgen("--url", sim.url, *ARGS, "--out", str(out),
                      *(("--max-failed-fraction", limit) if limit else ()))
    assert run.returncode == code, run.stderr
    doc, records = outputs(out)
    assert_accounted(doc, records, 32)
    cell = doc["cells"][0]
    failed = measured_failures(sim, records)
    assert 0 < failed < 32
    req = cell["requests"]
    assert (req["ok"], req["failed"], req["by_outcome"].get("http_error")) == (32 - failed, failed, failed)
    assert cell["failed_fraction"] == failed / 32
    assert cell["max_failed_fraction"] == (float(limit) if limit else 0.01)
    assert cell["status"] == status
    if status == "failed":
        assert cell["error"] == (f"{failed} of 32 requests failed ({failed / 32:.1%} > 0.01 --max-failed-fraction):"
                                 f" {failed} http_error")
        assert f"FAILED: {cell['error']}" in run.stdout
        assert problem(from_json(cell)) == cell["error"] and not usable(from_json(cell))
    else:
        note = f"{failed} of 32 failed: {failed} http_error"
        assert cell["error"] is None and note in cell["warnings"] and note in run.stdout
        assert problem(from_json(cell)) is None and failure_note(from_json(cell)) == note


def cell(ok: int, failed: int, status: str = "ok", **extra) -> dict:
    by = {"ok": ok, "timeout": failed} if failed else {"ok": ok}
    return {"status": status, "error": None if status == "ok" else "the server went away",
            "requests": {"ok": ok, "failed": failed, "by_outcome": by}, **extra}


@pytest.mark.unit
@pytest.mark.parametrize("entry,why", [
    (cell(100, 0), None),
    (cell(99, 1), None),  # exactly 1 %: not above the default limit
    (cell(98, 2), "2 of 100 requests failed (2.0% > 0.01 --max-failed-fraction): 2 timeout"),
    (cell(98, 2, max_failed_fraction=0.05), None),  # the limit the cell was measured with
    (cell(7, 25, status="failed"), "the server went away"),
    ({"status": "skipped", "error": "not measured: interrupted by SIGINT"}, "not measured: interrupted by SIGINT"),
    # a file written before cells were judged: status ok, but judged by its counts
    ({"status": "ok", "requests": {"ok": 36, "failed": 28, "by_outcome": {"ok": 36, "http_error": 28}}},
     "28 of 64 requests failed (43.8% > 0.01 --max-failed-fraction): 28 http_error"),
])
def test_problem_says_why_a_cell_cannot_be_used(entry, why):
    assert problem(typed(entry)) == why
    assert usable(typed(entry)) is (why is None)
