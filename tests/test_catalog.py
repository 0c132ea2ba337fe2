"""The catalog of figures (`loadgen/metrics/catalog.py`): every entry reads a number from real results (the
summaries frozen in tests/fixtures/summary_golden, the results files of tests/fixtures/results-0.1, GPU activity
made by `gpu_window.cell_activity`), every direction is the one written out here (not read back from the catalog),
a misspelt path or key fails at once, and the views name no figure the catalog lacks."""

from __future__ import annotations

import ast
import json
import re

import orjson
import pytest

from exporters.cell_results import CELL_RESULTS
from loadgen.metrics import catalog
from loadgen.metrics.catalog import CATALOG, COMPARED, FIGURES, Shown
from loadgen.metrics.gpu_activity import SW_POWER_CAP, GpuActivityStats
from loadgen.metrics.gpu_window import cell_activity
from loadgen.names import Better
from loadgen.report.compare import INTERVALS, METRICS
from loadgen.report.compare_terms import FIGURES as GATE_FIGURES
from loadgen.results.cell_result import RESERVED, CellResult, from_json, part_keys
from loadgen.results.cell_view import catalog_figure, check_path, declared, figure
from loadgen.results.objectives import SPECS
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

S = 1_000_000_000
HIGH, LOW, NEITHER = Better.HIGH, Better.LOW, Better.NEITHER
# which way each figure is better, written out apart from the catalog: latencies, power, energy per token,
# failures and a saturated client lower; throughputs, accept length and tokens per joule higher; states neither
DIRECTIONS = {
    "ok_requests": NEITHER, "failed_requests": LOW, "out_tok_s": HIGH, "good_tok_s": HIGH, "req_tok_s": HIGH,
    "req_tok_s_p10": HIGH, "ttft_mean_s": LOW, "ttft_p50_s": LOW, "ttft_p99_s": LOW, "itl_p90_s": LOW, "prefill_tok_s": HIGH,
    "e2e_mean_s": LOW, "tokens_per_chunk": HIGH, "accept": HIGH, "verify_steps_per_s": HIGH, "step_ms": LOW,
    "full_draft_share": NEITHER, "power_w": LOW, "j_per_token": LOW, "tokens_per_j": HIGH, "power_fraction": NEITHER,
    "gpu_utilization": NEITHER, "gpu_sm_clock": NEITHER, "gpu_power_capped": LOW, "gpu_dram_active": NEITHER,
    "gpu_tensor_active": NEITHER, "loop_lag_p99_s": LOW, "client_saturated": LOW,
}
# a unit → the direction every figure in it must have (a latency is never "larger is better")
BY_UNIT = {"ms": LOW, "s": LOW, "W": LOW, "J/tok": LOW, "tok/s": HIGH, "steps/s": HIGH, "tok/J": HIGH}


def _gpu_activity() -> dict:
    stats = GpuActivityStats()
    reading = {"utilization_percent": 80, "sm_clock_mhz": 1500, "sm_clock_max_mhz": 2000, "dram_active": 0.5,
               "tensor_active": 0.3, "clock_events": SW_POWER_CAP}
    stats.add(1 * S, reading)
    stats.add(2 * S, reading)
    return cell_activity("dcgm", [{"gpu": 0, "series": stats.to_json()}], {"start_ns": 1 * S, "end_ns": 2 * S}, {})


def real_cells() -> list[CellResult]:
    """Cells loadgen wrote: every golden summary, the cells of the 0.1 results files, one with GPU activity."""
    golden = orjson.loads((ROOT / "tests/fixtures/summary_golden/build_cell.json").read_bytes())
    files = [json.loads(p.read_text()) for p in sorted((ROOT / "tests/fixtures/results-0.1").glob("*.json"))]
    cells = [*golden.values(), *(c for doc in files for c in doc["cells"])]
    return [from_json(c) for c in cells] + [from_json(cells[-1] | {"gpu_activity": _gpu_activity()})]


CELLS = real_cells()


@pytest.mark.parametrize("fig", CATALOG, ids=lambda f: f.key)
def test_every_entry_reads_a_number_from_a_real_result(fig):
    for path in (fig.path,) if fig.path else fig.inputs:
        check_path(path)
    values = [catalog_figure(c, fig.key) for c in CELLS]
    assert any(isinstance(v, float | int) for v in values), f"{fig.key}: no real cell has it"


def test_every_direction_is_the_one_written_out():
    assert {f.key: f.better for f in CATALOG} == DIRECTIONS
    wrong = [f.key for f in CATALOG if f.unit in BY_UNIT and f.better is not BY_UNIT[f.unit]]
    assert wrong == []


def test_the_entries_are_whole():
    assert len(FIGURES) == len(CATALOG)
    assert all(f.meaning.endswith(".") and f.title for f in CATALOG)
    live = [f.live for f in CATALOG if f.live]
    assert len(live) == len(set(live)) and all(f.path for f in CATALOG if f.live)
    assert all(f.live.endswith("_seconds") for f in CATALOG if f.live and f.unit in ("ms", "s"))
    # a figure --repeat averages gets its interval under the same name; a compared one has a direction and a width
    assert all(f.interval == f.path for f in CATALOG if f.repeat)
    assert all(f.better is not NEITHER and f.width > 0 for f in COMPARED)
    names = [n for f in COMPARED for n in (f.name, *f.aliases)]
    assert len(names) == len(set(names))


def test_a_misspelt_path_or_key_fails_loudly():
    cell = CELLS[0]
    assert figure(cell, "ttft_s.p50") is not None
    for bad in ("ttft_s.p5O", "ttft_ss.p50", "output_tok_s.p50", "slo.good_tok_s", "power.mean_w",
                "gpu_activity.total.sm_activ", "steps.step_itl_s.maen"):
        with pytest.raises(KeyError):
            figure(cell, bad)
    with pytest.raises(KeyError, match="no figure 'ttft_p5O'"):
        catalog_figure(cell, "ttft_p5O")
    assert figure(cell, "intervals.anything") is None  # a block whose keys vary is not checked past


def test_the_declared_gpu_totals_and_steps_are_those_the_figures_write():
    from loadgen.metrics.gpu_window import FIGURE_FIELDS
    from loadgen.metrics.steps import step_figures
    from loadgen.results.figures import GpuTotal, Steps

    assert set(GpuTotal.__annotations__) == {"sm_clock_max_mhz", *FIGURE_FIELDS}
    assert set(Steps.__annotations__) == set(step_figures([]))


def _literal_paths() -> list[tuple[str, int, str]]:
    """Every string literal of the product that reads like a path into a cell ("ttft_s.p50"), where it is."""
    fields = {*part_keys(), *RESERVED}
    like = re.compile(r"^[a-z_0-9]+(\.[a-z_0-9]+)+$")
    found = []
    for path in [*ROOT.glob("loadgen/**/*.py"), *ROOT.glob("exporters/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if like.match(text) and text.split(".")[0] in fields and not text.endswith(".png"):
                found.append((str(path.relative_to(ROOT)), node.lineno, text))
    return found


def test_every_path_the_product_writes_out_is_declared():
    """A typo in a path that no test reaches still fails here (the literals are checked, not run)."""
    paths = _literal_paths()
    assert len(paths) > 40
    assert [p for p in paths if not declared(p[2])] == []


def test_the_verdicts_figures_are_entries():
    cell = CELLS[0]
    out, accept = figure(cell, "output_tok_s"), figure(cell, "accept_length.value")
    assert catalog_figure(cell, "verify_steps_per_s") == out / accept
    assert catalog_figure(cell, "step_ms") == 1000 * figure(cell, "steps.step_itl_s.mean")


def test_the_views_name_only_catalog_figures():
    """Compare's figures and intervals, the gate's, the exporter's gauges, the key figures of --repeat and the
    verdict's objectives are the catalog's, with its paths and directions."""
    assert list(METRICS.values()) == list(COMPARED)
    assert {f.key: f.interval for f in COMPARED if f.interval} == INTERVALS
    assert list(GATE_FIGURES.values()) == list(COMPARED)
    assert {(path, name) for path, name, _ in CELL_RESULTS.values()} == {(f.path, f.live) for f in CATALOG if f.live}
    for spec in SPECS.values():
        fig = FIGURES[spec.figure]
        assert (spec.path, spec.higher_is_better) == (fig.path, fig.better is HIGH)


def test_docs_figures_md_is_generated_from_the_catalog():
    from loadgen.metrics.catalog_doc import render

    assert (ROOT / "docs" / "figures.md").read_text() == render(), \
        "docs/figures.md is stale: python3 -m loadgen.metrics.catalog_doc > docs/figures.md"


def test_shown_columns():
    assert [f.key for f in COMPARED if f.compare is Shown.ALWAYS] == ["out_tok_s", "req_tok_s", "ttft_p50_s"]
    assert catalog.get("ttft_p50_s").text(0.0405) == "40.5" and catalog.get("accept").text(None) is None


def test_show_names_figures_as_the_gate_does(cli):
    from loadgen.errors import UsageError
    from loadgen.report.compare_terms import parse_shown

    assert parse_shown(" TTFT_P50_MS , accept,") == ("ttft_p50_s", "accept")
    with pytest.raises(UsageError, match="--show 'ttft_p5O': no such figure; known: out_tok_s, good_tok_s"):
        parse_shown("ttft_p5O")
    path = str(ROOT / "tests/fixtures/results-0.1/closed.json")
    res = cli("compare", path, "--show", "ttft_p5O")
    assert res.returncode == 2 and "no such figure" in res.stderr
    shown = cli("compare", path, "--show", "ttft_p50")  # a figure shown anyway: one column, as without --show
    assert shown.returncode == 0 and shown.stdout == cli("compare", path).stdout


# ---- ITL p90: one catalog entry over the cell's own per-token ITL, and every view has it ---------------------
def _itl_cell(gaps_ms: list[float], extra: tuple[int, float] | None = None, conc: int = 1) -> dict:
    """A cell built from records: one request of single-token chunks `gaps_ms` apart, and (extra) one whose
    second chunk carries n tokens after a gap of g ms (each of its tokens g/n ms apart)."""
    from loadgen.record import CellKey, Record
    from loadgen.results.build_cell import build_cell

    key, ms = CellKey(60, conc), 1_000_000

    def record(seq: int, tokens: list[int], gaps: list[float]) -> Record:
        span = int(sum(gaps) * ms)
        return Record("r", key, seq, t_intended_ns=0, t_sent_ns=0, t_first_token_ns=100 * ms,
                      t_last_token_ns=100 * ms + span, t_end_ns=100 * ms + span, prompt_tokens=60,
                      completion_tokens=sum(tokens), chunks=len(tokens), chunk_tokens=tokens,
                      chunk_gaps_ns=[int(g * ms) for g in gaps])
    recs = [record(0, [1] * (len(gaps_ms) + 1), gaps_ms)]
    if extra:
        recs.append(record(1, [1, extra[0]], [extra[1]]))
    return build_cell(key, recs).to_json()


def test_itl_p90_is_the_token_weighted_90th_percentile():
    cell = from_json(_itl_cell([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
    assert catalog_figure(cell, "itl_p90_s") == pytest.approx(0.009)  # 9 of 10 gaps are ≤ 9 ms
    # a 40 ms gap before a 4-token chunk: four tokens 10 ms apart, so 9 of 14 tokens are ≤ 9 ms and p90 is 10 ms
    assert catalog_figure(from_json(_itl_cell([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], (4, 40))), "itl_p90_s") == \
        pytest.approx(0.010)
    assert FIGURES["itl_p90_s"].text(0.009) == "9.0"  # shown in ms


def _itl_cells() -> dict[str, list[dict]]:
    """Two configurations: b's tokens 30 % slower than a's at c=1, as fast at c=2."""
    return {"a": [_itl_cell([10] * 20), _itl_cell([10] * 20, conc=2)],
            "b": [_itl_cell([13] * 20), _itl_cell([10] * 20, conc=2)]}


def _itl_runs() -> list:
    from loadgen.report.compare import Run, cell_key

    return [Run(name, f"{name}.json", {}, {cell_key(c): from_json(c) for c in cells})
            for name, cells in _itl_cells().items()]


def test_compare_has_itl_p90_in_its_rows_and_shows_it_when_asked(cli, tmp_path):
    from loadgen.report import compare, html_tables

    runs = _itl_runs()
    rows = compare.comparison(runs, 0)
    assert [r["itl_p90_s"] for r in rows] == pytest.approx([0.010, 0.013, 0.010, 0.010])  # c=1: a, b; c=2: a, b
    assert "itl_p90_s" in rows[0]["best"]  # 10 ms against 13 ms: exact figures, no interval to weigh
    assert "ITL p90 ms" not in compare.render_text(rows)  # the default table is as it was
    shown = compare.render_text(rows, ("itl_p90_s",))
    assert "ITL p90 ms" in shown and "13.0" in shown and "10.0*" in shown
    assert "itl_p90_s" in compare.compare_table(runs, None, "csv").splitlines()[0].split(",")
    assert 'data-metric="itl_p90_s"' in html_tables.comparison_table(runs, 0, ("itl_p90_s",))
    assert 'data-metric="itl_p90_s"' not in html_tables.comparison_table(runs, 0)
    paths = []
    for name, cells in _itl_cells().items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name, "cells": cells}))
        paths.append(str(path))
    res = cli("compare", *paths, "--show", "itl_p90")
    assert res.returncode == 0 and "ITL p90 ms" in res.stdout
    gated = cli("compare", *paths, "--fail-on", "itl_p90:+10%")
    assert gated.returncode == 1 and "itl_p90" in gated.stdout  # 10 → 13 ms: a regression beyond the limit


def test_the_gate_judges_itl_p90():
    from loadgen.report.compare_terms import parse_fail_on
    from loadgen.report.regression_gate import Verdict, gate, pairs

    term = parse_fail_on("itl_p90_ms:+2ms")[0]
    assert (term.figure.key, term.worse, term.limit) == ("itl_p90_s", HIGH, 2.0)
    result = gate(pairs(_itl_runs(), 0), [term])
    assert [(r.key.concurrency, r.verdict, r.a, r.b) for r in result.rows] == [
        (1, Verdict.REGRESSED, pytest.approx(10.0), pytest.approx(13.0)),
        (2, Verdict.WITHIN_LIMIT, pytest.approx(10.0), pytest.approx(10.0))]


def test_the_exporter_and_repeat_have_itl_p90():
    from exporters.live import LiveExporter
    from loadgen.record import CellKey
    from loadgen.results.repeats import combine_repeats

    exp = LiveExporter("r1")
    exp.cell_started(CellKey(60, 1), "r1")
    exp.cell_finished(CellKey(60, 1), from_json(_itl_cell([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])))
    labels = {"run": "r1", "concurrency": "1", "context_tokens": "60", "request_rate": ""}
    assert exp.registry.get_sample_value("loadgen_cell_itl_p90_seconds", labels) == pytest.approx(0.009)
    cell = combine_repeats([from_json(_itl_cell([g] * 20)) for g in (10, 12, 14)])
    assert figure(cell, "itl_s.p90") == pytest.approx(0.012)  # the mean of the three measurements
    assert (cell.noise.repeats or {})["values"]["itl_s.p90"] == pytest.approx([0.010, 0.012, 0.014])
    low, high = (cell.noise.intervals or {})["itl_s.p90"]
    assert low < 0.012 < high
