"""The report's plot data (pure: results in, series out), the axes that carry it, and `loadgen report`'s edges:
unmeasured cells left out, open-loop cells placed by rate, per-category and per-source accept length, power
per GPU against its limit, the simulator marked, the table printed even without matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.report import plot_data as pd
from loadgen.report.compare import load_inputs
from loadgen.report.plot_axes import level_axis, sim_note, use_agg, value_axis
from loadgen.report.plots import render

ROOT = Path(__file__).resolve().parents[1]


def cell(ctx, conc, out, *, rate=None, ok=8, failed=0, status="ok", accept=None, per_source=None, power=None,
         categories=None, p10=None):
    c = {"context_tokens": ctx, "concurrency": conc, "status": status, "output_tok_s": out,
         "request_tok_s": {"mean": out / max(conc, 1), "p10": p10}, "ttft_s": {"p50": 0.01, "p99": 0.05},
         "ttft_from_intended_s": {"p99": 0.06}, "requests": {"ok": ok, "failed": failed,
                                                            "by_outcome": {"ok": ok, "timeout": failed}}}
    if rate is not None:
        c["request_rate"] = rate
    if accept is not None:
        c["accept_length"] = {"value": accept, "source": "per_request", "per_source": per_source or {}}
    if power:
        c["power"] = power
    if categories:
        c["by_category"] = categories
    return c


def write(tmp: Path, name: str, cells: list[dict], speed=None) -> str:
    info = {"speculative_ddtree_budget": 16} | ({"sim_speed": speed} if speed else {})
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name, "cells": cells,
                                "target": {"server_info": info}}))
    return str(path)


@pytest.mark.unit
def test_unusable_cells_are_left_out_and_open_loop_is_placed_by_rate(tmp_path):
    a = write(tmp_path, "a", [cell(60, 1, 100.0), cell(60, 4, 300.0, ok=4, failed=4),  # 50 % failed: not measured
                              cell(60, 8, 0.0, status="failed"), cell(60, 0, 250.0, rate=2.0),
                              cell(60, 0, 400.0, rate=4.0)])
    runs = load_inputs([a])
    assert pd.series_vs_concurrency(runs, pd.path("output_tok_s")) == {60: {"a": [(1, 100.0)]}}
    assert pd.series_vs_rate(runs, pd.path("output_tok_s")) == {60: {"a": [(2.0, 250.0), (4.0, 400.0)]}}
    plots, notes = render(runs)
    assert "open_loop.png" in [p.name for p in plots] and notes == [
        "accept_length.png not written: no measured cell has an accept length",
        "power.png not written: no cell has power data (measure with --dcgm URL or --nvml)",
        "gpu.png not written: no cell has GPU utilization (--dcgm URL or --nvml)"]


@pytest.mark.unit
def test_band_power_per_gpu_and_limit(tmp_path):
    power = {"gpus": 4, "mean_w_total": 1800.0, "limit_w_total": 4400.0, "j_per_output_token": 0.5}
    a = write(tmp_path, "a", [cell(60, 1, 100.0, p10=80.0, power=power), cell(60, 2, 180.0, power=power)])
    runs = load_inputs([a])
    band = pd.band_vs_concurrency(runs, pd.path("request_tok_s", "mean"), pd.path("request_tok_s", "p10"))
    assert band == {60: {"a": [(1, 100.0, 80.0), (2, 90.0, None)]}}
    assert pd.series_vs_concurrency(runs, pd.per_gpu(pd.path("power", "mean_w_total"))) == \
        {60: {"a": [(1, 450.0), (2, 450.0)]}}
    assert pd.power_limit_per_gpu(runs) == 1100.0


@pytest.mark.unit
def test_accept_by_source_and_by_category(tmp_path):
    cats = {"code": {"accept_length": {"value": 6.0, "source": "per_request"}},
            "chat": {"accept_length": {"value": 3.0, "source": "per_request"}}}
    cats2 = {"code": {"accept_length": {"value": 5.0, "source": "per_request"}}}
    a = write(tmp_path, "a", [cell(60, 1, 1.0, accept=4.0, per_source={"per_request": 4.0, "gauge": 3.0},
                                   categories=cats),
                              cell(60, 2, 1.0, accept=5.0, per_source={"per_request": 5.0, "chunks": 5.5},
                                   categories=cats2)])
    runs = load_inputs([a])
    assert pd.accept_by_source(runs) == {60: {"a": {"per_request": (4.5, 4.0, 5.0), "gauge": (3.0, 3.0, 3.0),
                                                    "chunks": (5.5, 5.5, 5.5)}}}
    assert list(pd.accept_by_source(runs)[60]["a"]) == ["per_request", "gauge", "chunks"]  # sources' order
    assert pd.accept_by_category(runs) == {"a": {"chat": (3.0, 3.0, 3.0), "code": (5.5, 5.0, 6.0)}}
    assert pd.chosen_sources(runs) == ["per_request"]
    assert "accept_categories.png" in [p.name for p in render(runs)[0]]


@pytest.mark.unit
def test_simulated_runs_are_marked(tmp_path):
    real = load_inputs([write(tmp_path, "real", [cell(60, 1, 1.0)])])
    sim = load_inputs([write(tmp_path, "sim", [cell(60, 1, 1.0)], speed=4.0)])
    assert sim_note(real) is None
    assert sim_note(real + sim) == "SIMULATED, speed ×4: tok/s inflated and J/token deflated by that factor"


@pytest.mark.unit
def test_log2_axis_ticks_at_the_measured_levels_and_a_single_point_is_not_clipped():
    use_agg()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 32, 64, 128], [1, 2, 3, 4])
    level_axis(ax, [1, 32, 64, 128, 32], "concurrency")
    value_axis(ax, "tok/s", [5.0])
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [1, 32, 64, 128]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "32", "64", "128"]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 5.0 * 1.1
    plt.close(fig)


@pytest.mark.sim
def test_report_without_matplotlib_still_prints_the_table_and_writes_the_page(tmp_path):
    path = write(tmp_path, "a", [cell(60, 1, 123.4)])
    html = tmp_path / "r.html"
    code = ("import sys; sys.modules['matplotlib'] = None; from loadgen.cli.main import main; "
            f"sys.exit(main(['report', {path!r}, '--html', {str(html)!r}]))")
    res = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.index("123.4") < res.stdout.index("note: plots need matplotlib")
    assert "<img" not in html.read_text() and "123.4" in html.read_text()


@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--html", "--plots"])
def test_report_output_in_a_missing_folder_makes_the_folder_as_out_does(tmp_path, flag, cli):
    """A folder that cannot be made is one line and exit 2 (tests/test_everyday_errors.py)."""
    path = write(tmp_path, "a", [cell(60, 1, 1.0)])
    res = cli("report", path, flag, str(tmp_path / "no" / "x"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "no" / "x").is_file() if flag == "--html" else (tmp_path / "no" / "x").is_dir()


@pytest.mark.unit
def test_gpu_plot_carries_utilization_and_power_share_per_configuration(tmp_path):
    def busy(conc, util, share):
        c = cell(60, conc, 100.0 * conc, power={"mean_w_total": 700 * share, "power_fraction_of_limit": share})
        return c | {"gpu_activity": {"total": {"utilization_percent": util}}, "bottleneck": "server_host"}
    runs = load_inputs([write(tmp_path, "host", [busy(1, 12.0, 0.2), busy(8, 17.0, 0.25)])])
    assert pd.series_vs_concurrency(runs, pd.path("gpu_activity", "total", "utilization_percent")) == {
        60: {"host": [(1, 12.0), (8, 17.0)]}}
    plots, _ = render(runs)
    assert "gpu.png" in [p.name for p in plots]
