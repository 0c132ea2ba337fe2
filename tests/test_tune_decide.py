"""`loadgen tune`'s decisions without a server: a part's size, stop or measure again after a part, the parts a
visit asks for (driven by hand-made results, as the runner would), the contenders at the end, the noise between
parts, what makes a configuration infeasible, and the `[tune]` table's checks."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from loadgen.errors import UsageError
from loadgen.record import CellKey
from loadgen.results.cell_result import from_json
from loadgen.results.document import ResultsFile
from loadgen.results.objectives import SPECS, Objective
from loadgen.results.verdict import BetweenRuns, Decision, Estimate, Load, Verdict
from loadgen.tune.budget import Budget
from loadgen.tune.decide import (
    Step,
    after_part,
    contenders,
    decidable,
    part_requests,
    parts_most,
    reach,
    visit_order,
)
from loadgen.tune.plan import Role, VisitPlan, Want
from loadgen.tune.spec import TuneSettings, parse_tune_spec
from loadgen.tune.standings import infeasible_of, read_standings, telling_line

pytestmark = pytest.mark.unit

OUT = SPECS[Objective.OUTPUT_TOK_S]
C1, C4 = Load(60, 1, None), Load(60, 4, None)


def est(name: str, value: float, half_pct: float, n: int = 1) -> Estimate:
    half = value * half_pct / 100
    return Estimate(name, value, (value - half, value + half), (value,) * n)


def cell(load: Load, again: int, tok_s: float, half_pct: float = 2.0, **extra: Any) -> dict[str, Any]:
    half = tok_s * half_pct / 100
    return {"context_tokens": load.context_tokens, "concurrency": load.concurrency, "again": again,
            "requests": {"ok": 16, "failed": 0}, "output_tok_s": tok_s,
            "intervals": {"output_tok_s": [tok_s - half, tok_s + half]}} | extra


@pytest.mark.parametrize("full, conc, share, part, most", [
    (64, 1, 0.25, 16, 4), (64, 4, 0.25, 16, 4), (128, 64, 0.25, 64, 2), (128, 32, 0.25, 32, 4),
    (20, 1, 0.25, 8, 2), (8, 1, 0.25, 8, 1), (64, 100, 0.25, 64, 1), (100, 1, 0.1, 10, 10),
])
def test_a_part_is_a_share_of_the_cell_at_least_one_wave_and_eight_requests(full, conc, share, part, most):
    assert part_requests(full, conc, share) == part
    assert parts_most(full, part) == most


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 15, 16])
def test_the_visit_order_starts_with_the_first_and_the_last_and_visits_each_once(n):
    order = visit_order(n)
    assert sorted(order) == list(range(n)) and order[0] == 0
    assert n < 2 or order[1] == n - 1
    assert visit_order(9) == [0, 8, 4, 2, 6, 1, 3, 5, 7]


def test_after_a_part_beyond_noise_either_way_stops():
    worse = after_part(est("x", 80, 2), est("lead", 100, 2), True, 0.02, parts=1, room=3)
    assert worse.step is Step.STOP and worse.why.startswith("beyond noise worse than lead (+25")
    better = after_part(est("x", 120, 2), est("lead", 100, 2), True, 0.02, parts=1, room=3)
    assert better.step is Step.STOP and better.why.startswith("leads lead beyond noise (+20")
    lower = after_part(est("x", 0.12, 2), est("lead", 0.10, 2), False, 0.02, parts=1, room=3)  # TTFT: lower wins
    assert lower.step is Step.STOP and "worse than lead" in lower.why


def test_close_is_measured_again_while_there_is_room_and_a_tie_inside_the_resolution_stops():
    close = after_part(est("x", 99, 3), est("lead", 100, 3), True, 0.02, parts=1, room=3)
    assert close.step is Step.EXTEND and close.why.startswith("close to lead (behind: +1.0%")
    full = after_part(est("x", 99, 3, n=4), est("lead", 100, 3), True, 0.02, parts=4, room=0)
    assert full.step is Step.STOP and full.why.endswith("measured in full")
    settled = after_part(est("x", 100.2, 0.3, n=4), est("lead", 100, 0.3), True, 0.02, parts=4, room=2)
    assert settled.step is Step.STOP and settled.why.startswith("tied with lead within ±2%")


def test_parts_that_could_not_decide_against_a_noisy_leader_are_not_measured():
    """The leader measured once at ±6 %: four parts of ±3 % each cannot settle a 1 % margin nor beat it."""
    leader = est("lead", 100, 6)
    futile = after_part(est("x", 99, 3), leader, True, 0.02, parts=1, room=3, part_se=0.03 / 1.96)
    assert futile.step is Step.STOP and "4 parts could not decide it against lead's own interval" in futile.why
    assert not reach(leader, math.log(100 / 99), 4, 0.03 / 1.96, 0.02)
    precise = est("lead", 100, 0.5, n=8)  # a precise leader: a 4 % margin is decidable with four parts of ±6 %
    assert reach(precise, math.log(100 / 96), 4, 0.06 / 1.96, 0.02)  # H = 1.96·√(0.26² + 1.53²) % = 3.0 %
    assert after_part(est("x", 96, 6), precise, True, 0.02, parts=1, room=3, part_se=0.06 / 1.96).step is Step.EXTEND
    # at the end both are measured again: two twins 0.5 % apart in parts of ±3 % cannot settle ±2 % in 4 parts
    futile_tie = after_part(est("x", 99.5, 3, n=2), est("lead", 100, 3), True, 0.02, parts=2, room=2,
                            part_se=0.03 / 1.96, both=True)
    assert futile_tie.step is Step.STOP and futile_tie.why.endswith("4 parts of each could not decide it: tied within noise")


def test_nothing_to_compare_with_or_no_figure_stops():
    assert after_part(est("x", 99, 3), None, True, 0.02, 1, 3).why == "the first configuration measured at this load"
    assert after_part(None, est("lead", 100, 3), True, 0.02, 1, 3).step is Step.STOP


def _verdict(decision: Decision, ranked: list[Estimate], tied: list[str]) -> Verdict:
    return Verdict(C4, Objective.OUTPUT_TOK_S, decision, ranked, tied, tied[1] if len(tied) > 1 else None, None, [])


def test_the_contenders_are_an_open_ties_set_and_none_when_decided_or_settled():
    a, b, c = est("a", 100, 4, n=4), est("b", 99, 4, n=4), est("c", 80, 2)
    assert contenders(_verdict(Decision.TIED, [a, b, c], ["a", "b"]), True, 0.02) == ["a", "b"]
    assert contenders(_verdict(Decision.WINS, [a, c], []), True, 0.02) == []
    tight = [est("a", 100, 0.2, n=8), est("b", 99.9, 0.2, n=8)]
    assert contenders(_verdict(Decision.TIED, tight, ["a", "b"]), True, 0.02) == []


def test_a_tie_no_round_could_move_has_no_contenders():
    """±24 % a measurement (a noisy host): a 5 % gap needs far more than 3 parts more of each to be beaten or
    settled, so the round is not run; ±4 % leaves a 5 % gap within reach of 3 more (beaten: 1.96·√2·4 %/2 < 5 %)."""
    noisy = [est("a", 105, 24), est("b", 100, 24), est("c", 104, 24)]
    v = _verdict(Decision.TIED, noisy, ["a", "b", "c"])
    assert contenders(v, True, 0.02) == ["a", "b", "c"]  # unsettled
    assert contenders(v, True, 0.02, room=3) == []
    assert not decidable(noisy[0], noisy[1], 3, 0.02)
    steady = [est("a", 105, 4), est("b", 100, 4), est("c", 104.9, 4)]
    v = _verdict(Decision.TIED, steady, ["a", "b", "c"])
    assert decidable(steady[0], steady[1], 3, 0.02)
    assert contenders(v, True, 0.02, room=3) == ["a", "b"]  # c, 0.1 % off, can neither be beaten nor settled


def test_the_noise_between_runs_is_the_verdicts_pooled_over_every_load_measured_twice(tmp_path):
    """Standings take the verdict's rule: each configuration × load measured n > 1 times adds Σ (ln x − mean)²
    with n − 1 degrees of freedom; the control's own `drift` part is not written, so its pair counts once."""
    for name, cells in (("a", [cell(C4, i, v) for i, v in enumerate((100, 104, 98))]),
                        ("b", [cell(C1, i, v) for i, v in enumerate((50, 49))])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"cells": cells, "sweep": {"attempts": []}}))
    spec = _spec({})
    spec.out_dir = str(tmp_path)
    spec.configs = [replace(spec.configs[0], name=n) for n in ("a", "b")]
    between = read_standings(spec).between
    logs = [math.log(x) for x in (100, 104, 98)]
    squares = sum((x - sum(logs) / 3) ** 2 for x in logs) + (math.log(50) - math.log(49)) ** 2 / 2
    assert (between.df, between.controls) == (3, 0)
    assert between.relative_se == pytest.approx(math.sqrt(squares / 3))


class Recorder:
    """What the runner does with a plan: measure each yielded cell (here: a value from `values`), add it."""

    def __init__(self, plan: VisitPlan, values: dict[Load, list[tuple[float, float]]],
                 stored: tuple[dict[str, Any], ...] = ()):
        self.results = ResultsFile("unused.json", kept=[from_json(c) for c in stored])
        self.plan, self.values, self.measured = plan, values, []

    def run(self) -> list[CellKey]:
        for key in self.plan.cells(self.results):
            load = Load.of(key)
            self.measured.append(key)
            self.results.add(from_json(cell(load, key.again, *self.values[load].pop(0))))
        return self.measured


def plan(wants: list[Want], rivals: dict[Load, Estimate | None], budget: Budget | None = None) -> VisitPlan:
    return VisitPlan("x", wants, rivals, OUT, 0.02, BetweenRuns(None, 0), budget or Budget(None, None),
                     say=lambda _: None)


def test_a_first_visit_stops_where_beaten_and_measures_a_close_load_again():
    """c=1: beaten after its first part. c=4: 4 % behind a precise leader at ±6 %, which more parts can decide: a
    second part, after which it is beaten."""
    wants = [Want(C1, Role.FIRST, 64, 16), Want(C4, Role.FIRST, 64, 16)]
    rivals = {C1: est("lead", 200, 2), C4: est("lead", 100, 0.5, n=8)}
    p = plan(wants, rivals)
    measured = Recorder(p, {C1: [(100, 2)], C4: [(96, 6), (95.5, 2)]}).run()
    assert measured == [CellKey(60, 1), CellKey(60, 4), CellKey(60, 4, None, 1)]
    assert [p.requests(k) for k in measured] == [16] * 3
    assert [s["why"].split(" (")[0] for s in p.stops] == ["beyond noise worse than lead"] * 2
    assert [part["role"] for part in p.parts] == ["first"] * 3
    assert p.parts[-1]["why"].startswith("close to lead (behind: +4.2%")


def test_a_close_part_the_leaders_noise_keeps_open_is_left_to_the_end():
    p = plan([Want(C4, Role.FIRST, 64, 16)], {C4: est("lead", 100, 6)})
    assert Recorder(p, {C4: [(99, 2)]}).run() == [CellKey(60, 4)]
    assert "both measured again at the end" in p.stops[0]["why"]


def test_a_resumed_visit_measures_only_what_is_left():
    """c=1 and c=4's first part were measured before the interrupt; c=4 is close: its next part is due, no other."""
    wants = [Want(C1, Role.FIRST, 64, 16), Want(C4, Role.FIRST, 64, 16)]
    rivals = {C1: est("lead", 200, 2), C4: est("lead", 100, 0.5, n=8)}
    stored = (cell(C1, 0, 100), cell(C4, 0, 96, 6))
    p = plan(wants, rivals)
    assert p.order([from_json(c) for c in stored]) == [CellKey(60, 1), CellKey(60, 4, None, 1)]
    assert Recorder(p, {C4: [(95.5, 2)]}, stored).run() == [CellKey(60, 4, None, 1)]


def test_a_contender_is_measured_again_at_least_once_and_the_control_judged_against_its_first_part():
    again = plan([Want(C4, Role.AGAIN, 64, 16)], {C4: est("lead", 200, 1, n=5)})
    assert Recorder(again, {C4: [(100, 2)]}, (cell(C4, 0, 100),)).run() == [CellKey(60, 4, None, 1)]
    control = plan([Want(C1, Role.CONTROL, 64, 16)], {C1: est("lead", 300, 1, n=5)})
    Recorder(control, {C1: [(90, 2)]}, (cell(C1, 0, 100),)).run()
    [drift] = control.control
    assert (drift["first"]["output_tok_s"], drift["again"]["output_tok_s"]) == (100, 90)
    assert control.parts[0]["role"] == "control"


def test_the_budget_ends_a_visit_before_its_next_part():
    p = plan([Want(C1, Role.FIRST, 64, 16), Want(C4, Role.FIRST, 64, 16)], {C1: None, C4: None}, Budget(3, None, 2))
    assert Recorder(p, {C1: [(100, 2)], C4: [(100, 2)]}).run() == [CellKey(60, 1)]
    assert p.ended == "max_cells 3 reached"


def test_a_failed_part_ends_the_visit():
    p = plan([Want(C1, Role.FIRST, 64, 16), Want(C4, Role.FIRST, 64, 16)], {C1: None, C4: None})
    results = ResultsFile("unused.json")
    keys = []
    for key in p.cells(results):
        keys.append(key)
        results.add(from_json({"context_tokens": 60, "concurrency": 1, "status": "failed", "error": "server down",
                               "incidents": [{"kind": "server_down", "reason": "the server went away"}]}))
    assert keys == [CellKey(60, 1)] and p.ended is not None


def _doc(ready: bool, reason: str | None, cells: list[dict[str, Any]], tail: str | None = None,
         interrupted_by: str | None = None, failure: str | None = None) -> dict[str, Any]:
    attempt = {"readiness": {"ready": ready}, "reason": reason, "outcome": "ok" if reason is None else "failed"}
    if interrupted_by:
        attempt["interrupted_by"] = interrupted_by
    if failure:
        attempt["failure"] = failure
    if tail:
        attempt["diagnostics"] = {"output_tail": tail}
    return {"run_id": "r2", "cells": cells, "sweep": {"attempts": [attempt]}}


def test_a_configuration_is_infeasible_when_it_did_not_come_up_or_a_cell_failed_and_never_when_interrupted():
    down = {"context_tokens": 60, "concurrency": 32, "run_id": "r2", "status": "failed",
            "incidents": [{"kind": "server_down", "reason": "the server went away"}]}
    tail = "==== diagnostics\nloading\nRuntimeError: CUDA error: an illegal memory access was encountered\nbye\n"
    died = infeasible_of("b64t8", _doc(True, "ctx=60 c=32: the server went away", [down], tail))
    assert died is not None and died.load == Load(60, 32, None)
    assert died.sentence() == ("b64t8: the server died under load at c=32: RuntimeError: CUDA error: an illegal memory "
                               "access was encountered")
    never = infeasible_of("b8", _doc(False, "not ready after 900 s", []))
    assert never is not None and never.load is None and "did not come up: not ready after 900 s" in never.reason
    assert infeasible_of("b8", _doc(True, "interrupted by SIGINT", [down], interrupted_by="SIGINT")) is None
    # the attempt's kind decides, not its words: the same reason without the mark is a failure under load
    assert infeasible_of("b8", _doc(True, "interrupted by SIGINT", [down])) is not None
    assert infeasible_of("b8", _doc(True, None, [])) is None
    crashed = infeasible_of("b8", _doc(True, "measurement crashed: OSError: x", [], failure="crashed"))
    assert crashed is not None and crashed.reason == "measurement crashed: OSError: x"
    assert infeasible_of("b8", _doc(True, "measurement crashed: OSError: x", [])) is None  # words alone decide nothing
    assert telling_line("a\nb\n") == "b"


def _spec(tune: Any, **matrix: Any) -> Any:
    doc = {"reconfigure": ["r.sh", "{budget}"], "server": {"url": "http://127.0.0.1:1"},
           "matrix": {"contexts": [60], "concurrency": [1, 4]} | matrix, "configs": [{"budget": 8}], "tune": tune}
    return parse_tune_spec(doc, "t.toml")


def test_the_tune_table_defaults_and_its_settings_keep_a_sweep_and_a_tune_apart():
    spec = _spec({})
    assert spec.tune == TuneSettings()
    assert spec.out_dir == "results/t-tune"
    assert spec.settings(spec.configs[0])["tune"] == {"first_part": 0.25}
    custom = _spec({"objective": "ttft_p50_s", "resolution": 0.05, "max_cells": 40, "max_gpu_minutes": 90, "rounds": 2})
    assert (custom.tune.objective, custom.tune.resolution, custom.tune.max_cells, custom.tune.max_gpu_minutes,
            custom.tune.rounds) == (Objective.TTFT_P50_S, 0.05, 40, 90.0, 2)


@pytest.mark.parametrize("tune, matrix, message", [
    ({"objective": "speed"}, {}, r"objective = 'speed' is unknown; choose one of output_tok_s"),
    ({"resolution": 2}, {}, r"resolution = 2 must be a fraction between 0 and 1"),
    ({"max_cells": 0}, {}, r"max_cells = 0 must be a whole number ≥ 1"),
    ({"max_gpu_minutes": "1h"}, {}, r"max_gpu_minutes = '1h' must be a number of minutes > 0"),
    ({"first_part": 0}, {}, r"first_part = 0 must be a share"),
    ({"rounds": 1.5}, {}, r"rounds = 1.5 must be a whole number ≥ 0"),
    ({"budget": 3}, {}, r"unknown key\(s\) budget; known: first_part, max_cells"),
    ("x", {}, r"tune must be a table"),
    ({}, {"duration_per_cell_s": 10}, r"duration_per_cell_s: a tune measures a load in parts"),
    ({}, {"repeat": 3}, r"repeat = 3: a tune measures a load again itself"),
])
def test_bad_tune_tables_are_one_line_errors(tune, matrix, message):
    with pytest.raises(UsageError, match=message) as exc:
        _spec(tune, **matrix)
    assert "\n" not in str(exc.value)


def test_a_file_without_a_tune_table_says_how_to_add_one():
    with pytest.raises(UsageError, match=r"the \[tune\] section is missing; add one"):
        parse_tune_spec({"reconfigure": ["r"], "server": {"url": "http://h:1"}, "matrix": {}}, "t.toml")


def test_the_cli_refuses_a_bad_tune_file_with_one_line_and_exit_2(tmp_path, cli):
    bad = tmp_path / "t.toml"
    bad.write_text('reconfigure = ["r.sh", "{budget}"]\n[server]\nurl = "http://127.0.0.1:1"\n'
                   '[matrix]\ncontexts = [60]\nconcurrency = [1]\n[tune]\nobjective = "speed"\n[[configs]]\nbudget = 1\n')
    res = cli("tune", str(bad))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "objective = 'speed' is unknown" in res.stderr
    missing = cli("tune", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "nope.toml: no such file; give the path of a tune TOML file" in missing.stderr
