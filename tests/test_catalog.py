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
    "req_tok_s_p10": HIGH, "ttft_mean_s": LOW, "ttft_p50_s": LOW, "ttft_p99_s": LOW, "prefill_tok_s": HIGH,
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
    for bad in ("ttft_s.p5O", "ttft_ss.p50", "output_tok_s.p50", "slo.good_tok_s", "power.mean_w"):
        with pytest.raises(KeyError):
            figure(cell, bad)
    with pytest.raises(KeyError, match="no figure 'ttft_p5O'"):
        catalog_figure(cell, "ttft_p5O")
    assert figure(cell, "gpu_activity.total.anything") is None  # a block whose keys vary is not checked past


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
