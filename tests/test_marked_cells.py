"""A failed check is not a failed measurement: a cell whose outputs were garbage (or that missed its SLO, or whose
client was saturated) was measured, so its figures stay in compare, the plots and the HTML report, marked, never
best, and the run still exits 1; only cells whose measurement failed leave the plots.

The real case: the reference is saved from a clean simulator, then `loadgen sim --garbage-above 0` loops on every
request, so every cell of the run fails its garbage check (the reference itself is clean: the check is on)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
from pathlib import Path

import pytest

from loadgen.report import plot_data as pd
from loadgen.report.compare import comparison, load_inputs
from loadgen.report.plot_marks import by_check, legend_label
from loadgen.results.cell_result import from_json
from loadgen.results.cell_status import (
    CHECK_INCIDENTS,
    CheckKind,
    failed_checks,
    measured,
    not_best,
    passed_checks,
    problem,
    unmeasured,
)
from loadgen.results.incidents import EFFECTS, Effect
from loadgen.results.objectives import Objective
from loadgen.results.verdict import Decision, verdicts
from tests.cells import typed
from tests.conftest import run_loadgen, start_sim

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

GARBAGE = "GARBAGE OUTPUT: 8 of 8 verification outputs (100% > 0 --max-garbage-fraction): 8 repetition_loop"
SLO = ("--slo", "ttft=2s,tpot=1s")  # lenient: every cell meets it, so only the garbage keeps it out of the verdict


# ---- the model: measured vs passed its checks (pure) ------------------------------------------------------------
def cell(status="ok", incidents=(), ok=16, failed=0, **extra) -> dict:
    error = "; ".join(i["reason"] for i in incidents if EFFECTS[i["kind"]] is not Effect.NOTE) or None
    return {"context_tokens": 60, "concurrency": 4, "status": status, "error": error, "output_tok_s": 500.0,
            "incidents": list(incidents), "requests": {"ok": ok, "failed": failed, "by_outcome": {"ok": ok}},
            **extra}


def inc(kind: str, reason: str) -> dict:
    return {"kind": kind, "reason": reason}


@pytest.mark.unit
def test_every_check_incident_names_its_check():
    assert {k for k, e in EFFECTS.items() if e is Effect.CHECK} == set(CHECK_INCIDENTS)


@pytest.mark.unit
@pytest.mark.parametrize("entry,was_measured,checks", [
    (cell(), True, []),
    (cell("failed", [inc("garbage_output", GARBAGE)]), True, [CheckKind.GARBAGE]),
    (cell("failed", [inc("output_mismatch", "OUTPUT MISMATCH (--verify exact): 1 of 8")]), True,
     [CheckKind.MISMATCH]),
    (cell(slo={"met": False, "attainment": 0.5, "attainment_required": 0.9}), True, [CheckKind.SLO]),
    (cell(client={"saturated": True, "reasons": ["event loop lag p99 80 ms"]}), True, [CheckKind.SATURATED]),
    # garbage beside a failed measurement: not measured, whatever else it failed
    (cell("failed", [inc("garbage_output", GARBAGE), inc("server_down", "the server went away")]), False,
     [CheckKind.GARBAGE]),
    (cell("failed", [inc("nothing_succeeded", "no request succeeded (16 failed)")], ok=0, failed=16), False, []),
    (cell("skipped", [inc("not_reached", "not measured: interrupted by SIGINT")]), False, []),
    (cell(ok=8, failed=8), False, []),  # too many failed requests, status ok in a hand-written file
    ({"status": "failed", "error": "the server went away"}, False, []),  # no incidents stored: by its status
])
def test_measured_and_passed_checks_are_two_questions(entry, was_measured, checks):
    entry = typed(entry)
    assert measured(entry) is was_measured and (unmeasured(entry) is None) is was_measured
    assert [f.kind for f in failed_checks(entry)] == checks and passed_checks(entry) is (not checks)
    assert (not_best(entry) is None) is (was_measured and not checks)


@pytest.mark.unit
def test_a_garbage_cell_is_measured_failed_and_never_best():
    garbage = cell("failed", [inc("garbage_output", GARBAGE)])
    assert measured(typed(garbage)) and problem(typed(garbage)) == GARBAGE == not_best(typed(garbage))  # the run and search still fail it
    fast = {"context_tokens": 60, "concurrency": 4, "output_tok_s": 900.0}
    rows = {r["config"]: r for r in comparison([_run("b0", garbage | fast), _run("b4", cell())])}
    assert rows["b0"]["measured"] and rows["b0"]["out_tok_s"] == 900.0 and rows["b0"]["checks"] == ["garbage output"]
    assert rows["b0"]["status"] == "failed" and rows["b0"]["best"] == [] and rows["b4"]["out_tok_s_x"] == 500 / 900


def _run(name: str, *cells: dict):
    from loadgen.report.compare import Run
    return Run(name, f"{name}.json", {}, {(c["context_tokens"], c["concurrency"], None): typed(c) for c in cells})


@pytest.mark.unit
def test_the_goodput_verdict_says_why_a_configuration_could_not_compete():
    met = {"met": True, "attainment": 1.0, "attainment_required": 0.9, "good_output_tok_s": 400.0}
    garbage = [cell("failed", [inc("garbage_output", GARBAGE)], slo=met, concurrency=c) for c in (1, 4, 8)]
    missed = cell(slo={"met": False, "attainment": 0.2, "attainment_required": 0.9, "good_output_tok_s": 10.0})
    down = cell("failed", [inc("server_down", "the server went away")], slo=met)
    plain = cell()
    runs = [_run("b0", *garbage), _run("b4", missed), _run("b8", down), _run("b16", cell(slo=met)), _run("b32", plain)]
    at_4 = next(v for v in verdicts(runs) if v.objective is Objective.GOOD_TOK_S and v.load.concurrency == 4)
    assert (at_4.decision, at_4.winner) == (Decision.ALONE, "b16")  # b32 has no goodput: measured without --slo
    reasons = dict(at_4.ineligible)
    assert reasons["b0"] == GARBAGE and reasons["b8"] == "the server went away"
    assert reasons["b4"] == "missed its SLO (attainment 20% < 90%)" and "b32" not in reasons


@pytest.mark.unit
def test_the_legend_names_each_check_and_the_cells_it_marks():
    marks = {("b0", 60, 1): "garbage output", ("b0", 60, 4): "garbage output, missed SLO", ("b4", 60, 4): "missed SLO"}
    assert by_check(marks) == {"garbage output": {"b0": 2}, "missed SLO": {"b0": 1, "b4": 1}}
    assert legend_label("missed SLO", {"b0": 1, "b4": 1}) == "hollow: missed SLO (b0: 1\ncell, b4: 1 cell)"


# ---- the real case: every cell of a run fails its garbage check --------------------------------------------------
@pytest.fixture(scope="module")
def garbled(tmp_path_factory):
    """(tmp, the garbled run's results, its CompletedProcess, a clean run's results): a reference saved from a
    clean simulator, then a run against one that loops on every request."""
    tmp = tmp_path_factory.mktemp("marked")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        clean, looping = pool.map(lambda a: start_sim(tmp, "--speed", "20", *a[1], name=a[0]),
                                  [("clean.jsonl", ()), ("loop.jsonl", ("--garbage-above", "0"))])
    try:
        common = ("--contexts", "60,256", "--requests-per-cell", "12", "--max-tokens", "24", "--verify",
                  "--verify-max-tokens", "48", *SLO)
        ref = run_loadgen("--url", clean.url, *common, "--concurrency", "1,4", "--label", "clean",
                          "--verify-save-reference", str(tmp / "ref.json"), "--out", str(tmp / "clean.json"))
        assert ref.returncode == 0, ref.stderr[-2000:]
        proc = run_loadgen("--url", looping.url, *common, "--concurrency", "1,4", "--label", "garbled",
                           "--verify-reference", str(tmp / "ref.json"), "--out", str(tmp / "garbled.json"))
    finally:
        clean.stop()
        looping.stop()
    return tmp, json.loads((tmp / "garbled.json").read_text()), proc


@pytest.mark.sim
def test_every_cell_fails_its_garbage_check_and_the_run_exits_1(garbled):
    _, doc, proc = garbled
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert len(doc["cells"]) == 4
    for c in doc["cells"]:
        assert c["status"] == "failed" and c["error"].startswith("GARBAGE OUTPUT"), c["error"]
        assert c["output_tok_s"] > 0 and c["ttft_s"]["p50"] > 0 and measured(from_json(c))


@pytest.mark.sim
def test_compare_prints_their_figures_marked_and_the_verdict_says_why(garbled):
    tmp, doc, _ = garbled
    res = run_loadgen("compare", str(tmp / "garbled.json"), str(tmp / "clean.json"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for c in doc["cells"]:
        row = next(line for line in lines if re.match(rf"\s+{c['context_tokens']}\s+{c['concurrency']} garbled", line))
        assert f"{c['output_tok_s']:.1f}!" in row, row  # the figure, and the mark beside it
        assert "*" not in row  # never best
    assert "! measured, but the cell failed a check (garbage output" in res.stdout
    assert "garbled: FAILED CHECK, never best: GARBAGE OUTPUT: 8 of 8" in " ".join(res.stdout.split())  # wrapped
    joined = " ".join(res.stdout.split())
    loads = ", ".join(dict.fromkeys(f"c={c['concurrency']}" for c in doc["cells"]))  # per prompt length
    assert f"could not compete: garbled at {loads}: GARBAGE OUTPUT: 8 of 8" in joined  # the verdict says why
    assert "garbled wins" not in joined
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)


@pytest.mark.sim
def test_report_draws_their_tok_s_and_ttft_marked(garbled):
    tmp, doc, _ = garbled
    plots = tmp / "plots"
    res = run_loadgen("report", str(tmp / "garbled.json"), "--plots", str(plots))
    assert res.returncode == 0, res.stderr
    assert {"output_tok_s.png", "ttft.png", "request_tok_s.png", "pareto.png"} <= {p.name for p in plots.iterdir()}
    assert "not written: no measured closed-loop cell" not in res.stdout
    runs = load_inputs([str(tmp / "garbled.json")])
    marks = pd.check_marks(runs)
    assert {(ctx, conc) for _, ctx, conc in marks} == {(c["context_tokens"], c["concurrency"]) for c in doc["cells"]}
    assert all("garbage output" in names for names in marks.values())
    series = pd.series_vs_concurrency(runs, pd.path("output_tok_s"))
    assert sorted(v for by in series.values() for v in by["garbled"]) == sorted(
        (c["concurrency"], c["output_tok_s"]) for c in doc["cells"])


@pytest.mark.sim
def test_a_hollow_point_is_drawn_where_the_cell_failed_a_check(garbled):
    """Each panel drawn with the marks has a white-filled marker over every point whose cell failed a check, and
    only there; the PNG differs from the unmarked one (whose legend has no check entry)."""
    import matplotlib.pyplot as plt

    from loadgen.report import plot_axes as pa
    from loadgen.report.plot_axes import use_agg
    from loadgen.report.plots_load import Layer, Row, _draw_panel, grid
    tmp, _, _ = garbled
    use_agg()
    runs = load_inputs([str(tmp / "garbled.json")])
    series = pd.series_vs_concurrency(runs, pd.path("output_tok_s"))
    rows = [Row("tok/s", [Layer(series)])]
    marks = pd.check_marks(runs)
    assert marks and grid(runs, rows, "t", "c", {}) != grid(runs, rows, "t", "c", marks)
    look = (pa.config_colors(runs), pa.config_markers(runs), marks)
    for ctx, by in series.items():
        fig, ax = plt.subplots()
        _draw_panel(ax, rows[0], ctx, look, {}, "c")
        hollow = {(x, y) for line in ax.lines if line.get_markerfacecolor() == "white"
                  for x, y in zip(line.get_xdata(), line.get_ydata())}
        expected = {(x, y) for name, pts in by.items() for x, y in pts if (name, ctx, x) in marks}
        assert hollow == expected and expected
        plt.close(fig)


@pytest.mark.infra
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed (scripts/test-deps.sh)")
def test_the_html_report_shows_their_figures_marked_in_a_real_browser(garbled, tmp_path):
    from tests.test_report_html import field, read_page, shown_equals
    tmp, doc, _ = garbled
    html = tmp_path / "r.html"
    res = run_loadgen("report", str(tmp / "garbled.json"), str(tmp / "clean.json"), "--html", str(html))
    assert res.returncode == 0, res.stderr
    content, problems, _ = asyncio.run(read_page(html, tmp_path / "profile", shots="marked-"))
    assert problems == []
    table = next(t for t in content["tables"] if t["kind"] == "comparison")
    rows = [r for r in table["rows"] if r["data"]["config"] == "garbled"]
    assert len(rows) == len(doc["cells"])
    for row, c in zip(rows, sorted(doc["cells"], key=lambda c: (c["context_tokens"], c["concurrency"]))):
        assert row["data"]["measured"] == "yes" and row["data"]["checks"] == "garbage output"
        assert "checked" in row["classes"].split()
        out = next(td for td in row["cells"] if td["metric"] == "out_tok_s")
        assert shown_equals(field(c, "output_tok_s"), out["text"], 1) and not out["best"]
    assert len(content["imgs"]) >= 4 and all(i["colours"] > 2 for i in content["imgs"])


@pytest.mark.unit
def test_the_sweep_summary_counts_cells_measured_beside_those_ok():
    from loadgen.sweep.summary import _measured_note
    config = {"cells_ok": 0, "cells_measured": 4,
              "failed_checks": {"ctx=60 c=1": "garbage output", "ctx=60 c=4": "garbage output, missed SLO"}}
    assert _measured_note(config) == ", 4 more measured (failed a check: garbage output, missed SLO)"
    assert _measured_note({"cells_ok": 2, "cells_measured": 2, "failed_checks": {}}) == ""
