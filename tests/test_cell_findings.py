"""CellFindings and the builder's `amended`: what a driver, a shard, the workers or the server-down policy
learned of a cell becomes a new result; the result it amends stays as it was."""

from __future__ import annotations

import pytest

from loadgen.names import CellStatus
from loadgen.record import CellKey
from loadgen.results.build_cell import amended, build_cell
from loadgen.results.findings import NOTHING, CellFindings, incident
from loadgen.results.incidents import Incident, IncidentKind
from tests.test_cell_result import _record

pytestmark = pytest.mark.unit

K = IncidentKind
CELL = CellKey(60, 2)


def test_findings_add_up_later_after_earlier():
    a = CellFindings(load={"attempt": 0, "throttle": {"rate": 1}}, incidents=(Incident(K.NO_SLOT, "a"),),
                     warnings=("one",), workers=({"worker": 1},))
    b = CellFindings(load={"attempt": 1}, requests={"requests_not_sent": 3}, warnings=("two",),
                     workers=({"worker": 2},), run_id="r-control")
    both = a + b
    assert both.load == {"attempt": 1, "throttle": {"rate": 1}} and both.requests == {"requests_not_sent": 3}
    assert both.warnings == ("one", "two") and both.incidents == (Incident(K.NO_SLOT, "a"),)
    assert both.workers == ({"worker": 1}, {"worker": 2}) and both.run_id == "r-control"
    assert (a + NOTHING).workers == a.workers and NOTHING.empty and not a.empty


def test_amended_is_a_new_result_and_the_built_one_is_left_as_it_was():
    built = build_cell(CELL, [_record(i) for i in range(4)], client={"loop_lag_p99_s": 0.001, "cpu_percent": 5.0})
    before = built.to_json()
    later = amended(built, CellFindings(load={"attempt": 2}, requests={"requests_not_sent": 1},
                                        workers=({"worker": 1, "slots": 2, "loop_lag_p99_s": 0.002,
                                                  "cpu_percent": 7.0, "saturated": False},),
                                        warnings=("a note",), run_id="run-1")
                    + incident(K.SERVER_DOWN, "the server went away"))
    assert built.to_json() == before and later is not built
    assert later.load.attempt == 2 and later.requests.requests_not_sent == 1 and later.run_id == "run-1"
    assert later.telemetry.client["workers"] == 1 and later.telemetry.client["per_worker"][0]["worker"] == 1
    assert later.status is CellStatus.FAILED and later.error == "the server went away"
    assert later.warnings == [*built.warnings, "a note"]
    # the same incident again changes nothing; nothing found, the same result
    again = amended(later, incident(K.SERVER_DOWN, "the server went away"))
    assert again.incidents == later.incidents and amended(later, NOTHING) is later


def test_the_drivers_findings_come_after_the_builders_own():
    recs = [_record(0), _record(1, tokens=0)] + [_record(i) for i in range(2, 4)]
    found = CellFindings(load={"shard_has_no_slot": True}, incidents=(Incident(K.NO_SLOT, "no slot"),))
    built = build_cell(CELL, recs, client={"saturated": True, "loop_lag_p99_s": 0.5, "cpu_percent": 99.0},
                       found=found)
    kinds = [i.kind for i in built.incidents]
    assert kinds[-1] is K.NO_SLOT and K.CLIENT_SATURATED in kinds[:-1] and built.load.shard_has_no_slot


def test_an_unknown_field_fails_where_it_is_applied():
    with pytest.raises(TypeError):
        amended(build_cell(CELL, [_record(0)]), CellFindings(load={"no_such_field": 1}))


def test_a_worker_that_fell_behind_makes_the_cell_client_saturated_once():
    """The parent kept up, one worker did not: the merged client health is saturated, and so is the cell, with one
    CLIENT SATURATED incident that names the worker."""
    built = build_cell(CELL, [_record(i) for i in range(4)], client={"loop_lag_p99_s": 0.001, "cpu_percent": 5.0})
    assert not built.has(K.CLIENT_SATURATED)
    behind = {"worker": 2, "slots": 2, "loop_lag_p99_s": 0.05, "cpu_percent": 99.0, "saturated": True,
              "reasons": ["client CPU 99 % of one core > 90 %"]}
    later = amended(built, CellFindings(workers=(behind,)))
    assert later.telemetry.client["saturated"]
    (sat,) = [i for i in later.incidents if i.kind is K.CLIENT_SATURATED]
    assert "worker 2" in sat.reason
