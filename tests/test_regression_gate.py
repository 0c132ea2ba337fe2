"""`loadgen compare --fail-on`: the term parser, the verdict rule (beyond the limit and beyond noise), the gate over
results files written here with known figures and intervals, its text and Markdown, and the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.errors import UsageError
from loadgen.report.compare import METRICS, load_inputs
from loadgen.report.compare_summary import render_markdown, verdict_line
from loadgen.report.compare_terms import FIGURES, Better, CheckTerm, FigureTerm, GateCheck, parse_fail_on
from loadgen.report.regression_gate import Verdict, beyond_noise, gate, judge, pairs, pairs_by_name, worse_by
from loadgen.results.schema import SWEEP_SCHEMA

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("spec, expected", [
    ("out_tok_s:-5%", [("out_tok_s", Better.LOW, 0.05, True)]),
    ("ttft_p50:+10%", [("ttft_p50", Better.HIGH, 0.10, True)]),
    ("ttft_p50_s:+20ms", [("ttft_p50", Better.HIGH, 20.0, False)]),
    ("ttft_p50:+0.5s", [("ttft_p50", Better.HIGH, 500.0, False)]),
    ("out_tok_s:-50", [("out_tok_s", Better.LOW, 50.0, False)]),
    ("out_tok_s:-50tok/s", [("out_tok_s", Better.LOW, 50.0, False)]),
    ("out_tok_s:5%", [("out_tok_s", Better.LOW, 0.05, True)]),  # no sign: the figure's worse way
    ("ttft_p50:5%", [("ttft_p50", Better.HIGH, 0.05, True)]),
    ("accept:+0.5", [("accept", Better.HIGH, 0.5, False)]),  # a rise by choice: the sign rules
    ("j_per_token:+0.01J", [("j_per_token", Better.HIGH, 0.01, False)]),
    (" OUT_TOK_S : -5 % ,", [("out_tok_s", Better.LOW, 0.05, True)]),
])
def test_figure_terms(spec, expected):
    terms = parse_fail_on(spec)
    assert [(t.figure.name, t.worse, pytest.approx(t.limit), t.relative) for t in terms] == expected
    assert all(isinstance(t, FigureTerm) for t in terms)


def test_every_figure_of_the_compare_table_can_be_gated():
    assert sorted(f.key for f in FIGURES.values()) == sorted(METRICS)
    assert FIGURES["ttft_p50"].better is Better.LOW and FIGURES["accept"].better is Better.HIGH


def test_check_terms_and_the_example_of_the_issue():
    terms = parse_fail_on("out_tok_s:-5%,ttft_p50:+10%,garbage")
    assert [type(t) for t in terms] == [FigureTerm, FigureTerm, CheckTerm] and terms[2].check is GateCheck.GARBAGE
    assert [t.check for t in parse_fail_on("checks")] == list(GateCheck)
    assert [t.text for t in parse_fail_on("drift,failed")] == ["drift", "failed"]


@pytest.mark.parametrize("spec, said", [
    ("tok_s:-5%", "--fail-on 'tok_s:-5%': no figure 'tok_s'; known: figures out_tok_s, good_tok_s"),
    ("out_tok_s", "out_tok_s needs a limit, e.g. out_tok_s:-5%"),
    ("ttft_p50", "ttft_p50 needs a limit, e.g. ttft_p50:+5%"),
    ("out_tok_s:-5x", "out_tok_s is in tok/s, not 'x'"),
    ("out_tok_s:--5%", "the limit '--5%' is not like -5%, +10% or +20tok/s"),
    ("out_tok_s:fast", "is not like"),
    ("ttft_p50:+20W", "ttft_p50 is in ms, not 'W'"),
    ("garbge", "no figure or check 'garbge'; known: "),
    (",", "no term"),
])
def test_bad_terms_are_one_line_naming_the_term_and_what_is_known(spec, said):
    """What is known is listed where the name was wrong; a wrong limit points to the terms' doc instead (the
    line stays short)."""
    with pytest.raises(UsageError) as err:
        parse_fail_on(spec)
    message = str(err.value)
    assert said in message and "\n" not in message
    if "no figure" in said:
        assert "checks garbage, mismatch, slo, saturated, drift, failed" in message
    else:
        assert message.endswith("; see docs/ci.md") and len("loadgen: error: " + message) <= 120


DROP5 = parse_fail_on("out_tok_s:-5%")[0]
RISE10 = parse_fail_on("ttft_p50:+10%")[0]
RISE20MS = parse_fail_on("ttft_p50:+20ms")[0]


@pytest.mark.parametrize("term, a, b, a_iv, b_iv, verdict", [
    (DROP5, 100, 90, [99, 101], [89, 91], Verdict.REGRESSED),  # 10 % down, intervals apart
    (DROP5, 100, 90, [90, 110], [80, 100], Verdict.WITHIN_NOISE),  # 10 % down, its interval reaches 0
    (DROP5, 100, 96, [99.5, 100.5], [95.5, 96.5], Verdict.WITHIN_LIMIT),  # beyond noise, 4 % < 5 %
    (DROP5, 100, 95, None, None, Verdict.WITHIN_LIMIT),  # exactly the limit: not beyond it
    (DROP5, 100, 90, None, [89, 91], Verdict.REGRESSED),  # no interval: the limit alone judges
    (DROP5, 100, 120, [99, 101], [119, 121], Verdict.WITHIN_LIMIT),  # better
    (DROP5, 100, None, [99, 101], None, Verdict.NOT_MEASURED),
    (DROP5, None, 90, None, [89, 91], Verdict.NO_BASELINE),
    (RISE10, 40.0, 48.0, [39, 41], [47, 49], Verdict.REGRESSED),
    (RISE10, 40.0, 32.0, [39, 41], [31, 33], Verdict.WITHIN_LIMIT),  # faster first tokens
    (RISE10, 40.0, 48.0, [30, 50], [40, 56], Verdict.WITHIN_NOISE),
    (RISE20MS, 40.0, 55.0, [39, 41], [54, 56], Verdict.WITHIN_LIMIT),  # +15 ms < +20 ms
    (RISE20MS, 40.0, 65.0, [39, 41], [64, 66], Verdict.REGRESSED),
])
def test_the_verdict_rule(term, a, b, a_iv, b_iv, verdict):
    assert judge(term, a, b, a_iv, b_iv) is verdict


def test_worse_by_and_beyond_noise_by_direction():
    assert worse_by(DROP5, 100, 90) == pytest.approx(0.1) and worse_by(RISE10, 100, 90) == pytest.approx(-0.1)
    assert worse_by(RISE20MS, 40, 65) == 25 and worse_by(DROP5, 0, 5) == float("-inf")
    assert beyond_noise(DROP5, [99, 101], [89, 91]) is True
    assert beyond_noise(DROP5, [89, 91], [99, 101]) is False  # apart, but on the better side
    # overlapping intervals can still hold a change beyond noise: 100 → 93 has a margin interval of +1.3 … +13.6 %
    assert beyond_noise(DROP5, [95, 105], [90, 96], 100, 93) is True
    assert beyond_noise(DROP5, [90, 110], [85, 99], 100, 92) is False and beyond_noise(DROP5, None, [1, 2]) is None


def _cell(out, iv, ttft=0.040, ttft_iv=(0.039, 0.041), conc=8, incidents=(), status="ok", repeats=3):
    return {"context_tokens": 60, "concurrency": conc, "status": status, "output_tok_s": out,
            "request_tok_s": {"mean": out / conc}, "ttft_s": {"p50": ttft},
            "intervals": {"output_tok_s": list(iv), "ttft_s.p50": list(ttft_iv)},
            "repeats": {"n": repeats} if repeats > 1 else None, "requests": {"ok": 48, "failed": 0, "cancelled": 0},
            "incidents": [{"kind": k, "reason": r} for k, r in incidents],
            "error": "no request succeeded (8 failed)" if status == "failed" and not incidents else None}


def _write(tmp: Path, name: str, cells: list[dict]) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name, "cells": cells}))
    return str(path)


GARBAGE = ("garbage_output", "GARBAGE OUTPUT: 8 of 8 verification outputs (100% > 0 --max-garbage-fraction)")


@pytest.fixture
def pair(tmp_path):
    a = _write(tmp_path, "a", [_cell(386.0, (385.0, 387.0)), _cell(1000.0, (990.0, 1010.0), conc=32)])
    b = _write(tmp_path, "b", [_cell(350.0, (349.0, 351.0)),  # 9.3 % down, beyond noise
                               _cell(900.0, (800.0, 1000.0), conc=32, incidents=[GARBAGE], status="failed")])
    return tmp_path, a, b


def _gate(paths, spec):
    runs = load_inputs(paths)
    return gate(pairs(runs, 0), parse_fail_on(spec))


def test_the_gate_over_two_results_files(pair):
    _, a, b = pair
    result = _gate([a, b], "out_tok_s:-5%,ttft_p50:+10%,garbage")
    verdicts = {(r.key[1], r.term.text): r.verdict for r in result.rows}
    assert verdicts == {(8, "out_tok_s:-5%"): Verdict.REGRESSED, (8, "ttft_p50:+10%"): Verdict.WITHIN_LIMIT,
                        (8, "garbage"): Verdict.CHECK_PASSED, (32, "out_tok_s:-5%"): Verdict.WITHIN_NOISE,
                        (32, "ttft_p50:+10%"): Verdict.WITHIN_LIMIT, (32, "garbage"): Verdict.CHECK_FAILED}
    drop = result.rows[0]
    assert (drop.a, drop.b, drop.change, drop.b_interval) == (386.0, 350.0, pytest.approx(350 / 386 - 1), [349, 351])
    ttft = result.rows[1]
    assert (ttft.a, ttft.a_interval) == (pytest.approx(40.0), [pytest.approx(39.0), pytest.approx(41.0)])  # in ms
    assert result.failed and not result.one_measurement
    assert verdict_line(result) == ("❌ 1 regression beyond noise, 1 failed check (1 change past its limit within "
                                    "noise)")
    garbage = result.rows[-1]
    assert garbage.reason.startswith("GARBAGE OUTPUT: 8 of 8") and not garbage.in_baseline


def test_the_same_run_twice_passes_and_a_missing_cell_fails(pair, tmp_path):
    _, a, _ = pair
    same = _gate([a, a], "out_tok_s:-5%,checks")
    assert not same.failed and verdict_line(same) == "✅ no regression beyond noise"
    short = _write(tmp_path, "short", [_cell(386.0, (385.0, 387.0))])
    missing = _gate([a, short], "out_tok_s:-5%")
    assert [(r.key[1], r.verdict, r.reason) for r in missing.rows] == [
        (8, Verdict.WITHIN_LIMIT, ""), (32, Verdict.NOT_MEASURED, "no such cell")]
    unmeasured = _write(tmp_path, "down", [_cell(0.0, (0, 0), status="failed"), _cell(1000.0, (990, 1010), conc=32)])
    down = _gate([a, unmeasured], "out_tok_s:-5%,failed")
    assert [r.verdict for r in down.rows] == [Verdict.NOT_MEASURED, Verdict.CHECK_FAILED, Verdict.WITHIN_LIMIT,
                                              Verdict.CHECK_PASSED]
    assert down.rows[0].reason == down.rows[1].reason == "no request succeeded (8 failed)"


def test_one_measurement_and_figures_nobody_has_are_said(tmp_path):
    a = _write(tmp_path, "a", [_cell(386.0, (385.0, 387.0), repeats=1)])
    b = _write(tmp_path, "b", [_cell(385.0, (384.0, 386.0), repeats=1)])
    result = _gate([a, b], "out_tok_s:-5%,accept:-5%")
    assert result.one_measurement and [t.text for t in result.unjudged()] == ["accept:-5%"]
    md = render_markdown(result, "out_tok_s:-5%,accept:-5%", "a", "b", "| table |")
    lines = md.splitlines()
    assert lines[0] == "### ✅ no regression beyond noise"
    assert "| cell | figure | A: a | B: b | change | 95 % intervals A / B | limit | verdict |" in lines
    assert "| ctx 60 conc 8 | out_tok_s | 386.0 | 385.0 | -0.3% (-1.0 tok/s) | 385.0–387.0 / 384.0–386.0 | -5% | " \
           "✅ within limit |" in lines
    assert "- accept:-5%: no cell of the baseline has accept; it gates nothing" in lines
    assert any(line.startswith("- some cells were measured once") for line in lines)
    assert "<details><summary>the whole comparison</summary>" in lines and "| table |" in lines


def _sweep(tmp: Path, name: str, configs: dict[str, list[dict]]) -> str:
    folder = tmp / name
    folder.mkdir()
    for config, cells in configs.items():
        doc = {"schema": "loadgen.results/v1", "sweep": {"config": config}, "cells": cells}
        (folder / f"{config}.json").write_text(json.dumps(doc))
    sweep = {"schema": SWEEP_SCHEMA, "configs": [{"name": c, "results": f"{c}.json"} for c in configs]}
    (folder / "sweep.json").write_text(json.dumps(sweep))
    return str(folder)


def test_two_sweeps_are_gated_configuration_by_configuration(tmp_path, cli):
    a = _sweep(tmp_path, "main", {"b16": [_cell(386.0, (385.0, 387.0))], "b32": [_cell(500.0, (499.0, 501.0))],
                                  "b64": [_cell(300.0, (299.0, 301.0))]})
    b = _sweep(tmp_path, "pr", {"b16": [_cell(385.0, (384.0, 387.0))], "b32": [_cell(440.0, (439.0, 441.0))],
                                "b8": [_cell(100.0, (99.0, 101.0))]})
    paired = pairs_by_name(load_inputs([a]), load_inputs([b]))
    assert [(x and x.name, y and y.name) for x, y in paired] == [("b16", "b16"), ("b32", "b32"), ("b64", None),
                                                                  (None, "b8")]
    result = gate(paired, parse_fail_on("out_tok_s:-5%,failed"))
    assert [(r.config, r.term.text, r.verdict) for r in result.rows] == [
        ("b16", "out_tok_s:-5%", Verdict.WITHIN_LIMIT), ("b16", "failed", Verdict.CHECK_PASSED),
        ("b32", "out_tok_s:-5%", Verdict.REGRESSED), ("b32", "failed", Verdict.CHECK_PASSED),
        ("b64", "out_tok_s:-5%", Verdict.NOT_MEASURED), ("b64", "failed", Verdict.CHECK_FAILED),
        ("b8", "failed", Verdict.CHECK_PASSED)]
    assert result.rows[4].reason == "the configuration is not in the compared run" and result.unpaired == ["b8"]
    res = cli("compare", a, b, "--fail-on", "out_tok_s:-5%", "--format", "md")
    assert res.returncode == 1 and res.stdout.startswith("### ❌ 1 regression beyond noise, 1 figure not measured\n")
    assert f"| cell | configuration | figure | A: {a} | B: {b} |" in res.stdout
    assert "- b8: not in the baseline; only its checks are judged" in res.stdout


def test_the_cli_exits_1_on_a_regression_and_writes_the_summary(pair, cli):
    tmp, a, b = pair
    summary = tmp / "summary.md"
    summary.write_text("earlier step\n")
    res = cli("compare", a, b, "--fail-on", "out_tok_s:-5%,garbage", "--summary-out", str(summary))
    assert res.returncode == 1, res.stderr
    assert "gate --fail-on out_tok_s:-5%,garbage: FAIL: 1 regression beyond noise, 1 failed check" in res.stdout
    assert max(len(line) for line in res.stdout.splitlines()) <= 120
    written = summary.read_text()
    assert written.startswith("earlier step\n### ❌ 1 regression beyond noise, 1 failed check")  # appended
    md = cli("compare", a, b, "--fail-on", "out_tok_s:-5%", "--format", "md")
    assert md.returncode == 1 and md.stdout.startswith("### ❌ 1 regression beyond noise")
    assert cli("compare", a, a, "--fail-on", "out_tok_s:-5%,checks").returncode == 0
    assert cli("compare", a, b).returncode == 0  # no gate asked: today's compare


def test_the_cli_refuses_one_run_to_gate(pair, cli):
    _, a, _ = pair
    res = cli("compare", a, "--fail-on", "out_tok_s:-5%")
    assert res.returncode == 2 and "holds one run, nothing to gate it against" in res.stderr


def test_the_cli_refuses_a_bad_term_before_reading_anything(cli, tmp_path):
    res = cli("compare", str(tmp_path / "nope.json"), "--fail-on", "out_tok_s:-5%,garbge")
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert "--fail-on 'garbge': no figure or check 'garbge'; known: figures out_tok_s" in line
