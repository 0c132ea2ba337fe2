"""CellResult: the judgement from incidents, the builder against records whose figures are known, and files
written by earlier versions read back, judged, compared and kept on resume as they were."""

from __future__ import annotations

import pathlib

import pytest

from loadgen.files import read_json
from loadgen.metrics.source_result import SourceResult
from loadgen.names import CellStatus, Outcome
from loadgen.record import CellKey, Record
from loadgen.report.compare import compare_table, load_inputs
from loadgen.results.build_cell import build_cell, unmeasured
from loadgen.results.cell_result import from_json
from loadgen.results.incidents import Incident, IncidentKind, judge
from loadgen.results.stored import kept_cells, stored_cells

pytestmark = pytest.mark.unit

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "results-0.1"
K = IncidentKind
MS = 1_000_000


def test_judge_skip_beats_fail_beats_ok_and_notes_never_fail():
    down, lost = Incident(K.SERVER_DOWN, "the server went away"), Incident(K.TELEMETRY_LOST, "TELEMETRY LOST")
    assert judge([]).status is CellStatus.OK
    assert judge([lost]).status is CellStatus.OK and judge([lost]).notes == ("TELEMETRY LOST",)
    assert judge([lost, down]).status is CellStatus.FAILED and judge([lost, down]).error == "the server went away"
    assert judge([down, Incident(K.NO_SLOT, "no slot")]).error == "no slot"
    # the failed requests are the server's going away: the error names the cause only
    many = Incident(K.FAILED_REQUESTS, "4 of 9 requests failed")
    assert judge([many, down]).error == "the server went away"
    assert judge([many]).error == "4 of 9 requests failed"


def _record(seq: int, outcome: Outcome = Outcome.OK, tokens: int = 11) -> Record:
    """A request sent at seq·10 ms, first token 5 ms later, then 10 tokens one ms apart in 10 chunks."""
    t0 = seq * 10 * MS
    ok = outcome is Outcome.OK
    return Record("r", CellKey(60, 2), seq, t_intended_ns=t0, t_sent_ns=t0, t_first_byte_ns=t0 + 4 * MS,
                  t_first_token_ns=t0 + 5 * MS if ok else None, t_last_token_ns=t0 + 15 * MS if ok else None,
                  t_end_ns=t0 + 15 * MS, outcome=outcome, prompt_tokens=60, completion_tokens=tokens if ok else None,
                  chunks=11 if ok else 0, chunk_tokens=[1] * 11 if ok else [], chunk_gaps_ns=[MS] * 10 if ok else [])


def test_builder_figures_and_incidents_from_known_records():
    recs = [_record(i) for i in range(4)]
    result = build_cell(CellKey(60, 2), recs)
    # window: first send 0 to last end 45 ms; 44 tokens over it
    assert result.load.duration_s == pytest.approx(0.045)
    assert result.throughput.output_tokens == 44
    assert result.throughput.output_tok_s == pytest.approx(44 / 0.045)
    assert result.latency.ttft_s["mean"] == pytest.approx(0.005)
    assert result.status is CellStatus.OK and result.incidents == [] and result.finished

    failed = build_cell(CellKey(60, 2), [*recs, _record(4, Outcome.HTTP_ERROR)])
    assert failed.status is CellStatus.FAILED and failed.has(K.FAILED_REQUESTS)
    assert failed.error == "1 of 5 requests failed (20.0% > 0.01 --max-failed-fraction): 1 http_error"
    tolerant = build_cell(CellKey(60, 2), [*recs, _record(4, Outcome.HTTP_ERROR)], max_failed_fraction=0.5)
    assert tolerant.status is CellStatus.OK and tolerant.notes == ["1 of 5 failed: 1 http_error"]
    nothing = build_cell(CellKey(60, 2), [_record(0, Outcome.TIMEOUT)])
    assert nothing.error == "no request succeeded (1 failed)"


def test_builder_turns_a_lost_source_into_an_incident_and_keeps_other_warnings():
    lost = SourceResult("dcgm", "power", True, {}, warnings=["dcgm: slow"], lost="TELEMETRY LOST (--dcgm): gone")
    result = build_cell(CellKey(60, 2), [_record(0)], [lost])
    assert result.status is CellStatus.OK and result.has(K.TELEMETRY_LOST)
    assert result.to_json()["warnings"] == ["TELEMETRY LOST (--dcgm): gone", "dcgm: slow"]


def test_the_json_round_trip_and_an_unmeasured_cell():
    result = build_cell(CellKey(60, 2), [_record(i) for i in range(3)])
    result.add(K.INTERRUPTED, "stopped early (interrupted by SIGINT): 1 of 4 measured requests not sent")
    back = from_json(result.to_json())
    assert back.to_json() == result.to_json() and back.incidents == result.incidents and not back.finished
    skipped = unmeasured(CellKey(1024, 8), K.INTERRUPTED_BEFORE, "not measured: interrupted by SIGINT", "run-1")
    assert skipped.to_json() == {"context_tokens": 1024, "concurrency": 8, "run_id": "run-1", "status": "skipped",
                                 "error": "not measured: interrupted by SIGINT", "warnings": [],
                                 "incidents": [{"kind": "interrupted_before", "reason": "not measured: interrupted by SIGINT"}]}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_files_of_earlier_versions_load_unchanged(path):
    doc = read_json(str(path))
    for cell in doc["cells"]:
        result = from_json(cell)
        written = result.to_json()
        assert {k: v for k, v in written.items() if k != "incidents"} == cell
        assert result.status == cell["status"] and result.error == cell["error"]


def test_earlier_files_are_judged_and_compared_as_before():
    failed = read_json(str(FIXTURES / "failed_power.json"))
    assert [c.status for c in stored_cells(failed)] == [CellStatus.FAILED] * 2
    assert [c.incidents[0].kind for c in stored_cells(failed)] == [K.RECORDED] * 2
    text = compare_table(load_inputs([str(FIXTURES / "closed.json"), str(FIXTURES / "failed_power.json")]),
                         baseline=None)
    assert "closed" in text and "failed_power" in text


def test_an_earlier_cell_stopped_early_is_measured_again_by_runs_and_sweeps_alike():
    doc = read_json(str(FIXTURES / "closed.json"))
    stopped = doc["cells"][1]
    stopped["requests_not_sent"] = 3
    stopped["warnings"] = ["stopped early (interrupted by SIGINT): 3 of 8 measured requests not sent"]
    assert [c.key for c in kept_cells(doc, None)] == [CellKey(60, 1)]
    again = from_json(stopped)
    assert again.status is CellStatus.OK and again.has(K.INTERRUPTED)
    assert again.to_json()["warnings"] == stopped["warnings"]  # the note once, not twice


def test_a_status_set_by_hand_is_honoured():
    result = build_cell(CellKey(60, 2), [_record(0)]).to_json()
    result |= {"status": "failed", "error": "bad cell"}
    assert from_json(result).status is CellStatus.FAILED and from_json(result).error == "bad cell"


def test_a_plain_run_and_a_sweep_keep_the_same_cells_of_one_interrupted_file(tmp_path, capsys):
    """The file an interrupt left (cell 1 ok, cell 2 stopped early, cell 3 not reached): resuming it as a plain
    run (cli.resume.Resume) and as a sweep configuration (what sweep.runner.run_config keeps) keep the same."""
    from loadgen.cli.resume import Resume
    from loadgen.cli.run_config import config_from_args
    from loadgen.cli.run_options import run_parser
    from loadgen.files import write_json_atomic

    doc = read_json(str(FIXTURES / "closed.json"))
    first, stopped = doc["cells"]
    stopped |= {"requests_not_sent": 3, "warnings": ["stopped early (interrupted by SIGINT): 3 of 8 measured "
                                                     "requests not sent"]}
    doc["cells"].append(unmeasured(CellKey(60, 8), K.INTERRUPTED_BEFORE, "not measured: interrupted by SIGINT").to_json())
    out = tmp_path / "run.json"
    argv = ["--concurrency", "1,4,8", "--contexts", "60", "--max-tokens", "32", "--requests-per-cell", "8",
            "--out", str(out)]
    doc["args"]["concurrency"] = [1, 4, 8]
    write_json_atomic(str(out), doc)
    plain = Resume(config_from_args(run_parser().parse_args(argv)))
    sweep = kept_cells(read_json(str(out)), [CellKey(60, 1), CellKey(60, 4), CellKey(60, 8)])
    assert [c.key for c in plain.kept] == [c.key for c in sweep] == [CellKey(60, 1)]
    assert plain.remaining == [CellKey(60, 4), CellKey(60, 8)]
    assert "1 of 3 cells already measured (ctx=60 c=1), kept; measuring 2 (2 failed or unmeasured before)" \
        in " ".join(ln.strip() for ln in capsys.readouterr().err.splitlines())  # wrapped at 120 columns


def test_an_incident_of_a_newer_loadgen_is_read_as_a_recorded_failure():
    cell = build_cell(CellKey(60, 2), [_record(0)]).to_json()
    cell["incidents"] = [{"kind": "gpu_on_fire", "reason": "GPU 3 at 95 C"}]
    result = from_json(cell | {"status": "failed", "error": "GPU 3 at 95 C"})
    assert result.status is CellStatus.FAILED and result.error == "gpu_on_fire: GPU 3 at 95 C"
