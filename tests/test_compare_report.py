"""`loadgen compare` and `loadgen report` over results files written here with known values: every figure in
the tables must be the input's, the best of each cell marked, speed-ups relative to the chosen baseline, and
the plots written (or left out, and said so, when their data is missing)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.report.compare import comparison, load_inputs, render_text
from loadgen.report.plot_data import accept_by_source, series_vs_concurrency
from loadgen.report.plots import render
from loadgen.report.report import write_plots

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

PNG = b"\x89PNG\r\n\x1a\n"


def cell(ctx, conc, out, req, ttft, accept, watts=None, j_tok=None, status="ok"):
    c = {"context_tokens": ctx, "concurrency": conc, "status": status, "output_tok_s": out,
         "request_tok_s": {"mean": req}, "ttft_s": {"p50": ttft}, "accept_length": {"value": accept,
                                                                                    "source": "per_request"},
         "error": None if status == "ok" else "no request succeeded (8 failed)"}
    if watts is not None:
        c["power"] = {"mean_w_total": watts, "j_per_output_token": j_tok, "output_tokens_per_j": 1 / j_tok,
                      "gpus": 8, "limit_w_total": 8800.0}
    return c


def write(tmp: Path, name: str, budget: int, cells: list[dict]) -> str:
    path = tmp / f"{name}.json"
    doc = {"schema": "loadgen.results/v1", "label": name, "cells": cells,
           "target": {"server_info": {"speculative_ddtree_budget": budget, "speculative_eagle_topk": 8}}}
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture
def inputs(tmp_path):
    a = write(tmp_path, "b16", 16, [cell(60, 1, 300.0, 310.0, 0.050, 5.5, 3600, 12.0),
                                    cell(60, 32, 4000.0, 130.0, 0.200, 5.4, 3700, 0.925),
                                    cell(1024, 1, 280.0, 290.0, 0.300, 5.6, 3600, 12.9)])
    b = write(tmp_path, "b32", 32, [cell(60, 1, 360.0, 370.0, 0.060, 7.9, 3800, 10.6),
                                    cell(60, 32, 3600.0, 120.0, 0.150, 7.8, 3900, 1.08),
                                    cell(1024, 1, 0.0, 0.0, 0.0, 0.0, status="failed")])
    c = write(tmp_path, "b64", 64, [cell(60, 1, 330.0, 340.0, 0.055, 9.1, 4000, 12.1),
                                    cell(60, 32, 3000.0, 100.0, 0.180, 9.0, 4100, 1.37)])
    return tmp_path, [a, b, c]


@pytest.mark.unit
def test_rows_values_best_and_speedups(inputs):
    _, paths = inputs
    runs = load_inputs(paths)
    rows = comparison(runs, base=0)
    assert [(r["context_tokens"], r["concurrency"], r["config"]) for r in rows] == [
        (60, 1, "b16"), (60, 1, "b32"), (60, 1, "b64"), (60, 32, "b16"), (60, 32, "b32"), (60, 32, "b64"),
        (1024, 1, "b16"), (1024, 1, "b32")]
    b32 = rows[1]
    assert (b32["out_tok_s"], b32["req_tok_s"], b32["ttft_p50_s"], b32["accept"], b32["power_w"],
            b32["j_per_token"]) == (360.0, 370.0, 0.060, 7.9, 3800, 10.6)
    assert b32["out_tok_s_x"] == pytest.approx(360 / 300) and rows[0]["out_tok_s_x"] == 1.0
    assert set(b32["best"]) == {"out_tok_s", "req_tok_s", "j_per_token"}
    assert set(rows[0]["best"]) == {"ttft_p50_s", "power_w"} and rows[2]["best"] == []  # accept length: never ranked
    assert set(rows[3]["best"]) == {"out_tok_s", "req_tok_s", "power_w", "j_per_token"}
    failed = rows[7]
    assert failed["status"] == "failed" and failed["out_tok_s"] is None and failed["best"] == []
    assert rows[6]["best"] == []  # one successful configuration in the cell: nothing to compare
    text = render_text(rows)
    assert "360.0*" in text and "1.20x" in text and "10.600*" in text
    assert "FAILED: no request succeeded" in text


@pytest.mark.unit
def test_compare_cli_baseline_and_formats(inputs, cli):
    tmp, paths = inputs
    res = cli("compare", *paths, "--baseline", "b32", "--format", "csv", "--out", str(tmp / "t.csv"))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 8 and (tmp / "t.csv").read_text().strip() == res.stdout.strip()
    r = rows[3]  # ctx 60, c=32, b16 against b32
    assert (r["config"], float(r["out_tok_s"])) == ("b16", 4000.0)
    assert float(r["out_tok_s_x"]) == pytest.approx(4000 / 3600)
    assert rows[6]["out_tok_s_x"] == ""  # the baseline failed that cell: no speed-up
    md = cli("compare", *paths, "--format", "md")
    assert md.stdout.splitlines()[0].startswith("| ctx | conc | configuration | out tok/s |")
    table_md, *knees = md.stdout.split("\n\nknee ")
    assert "| **360.0** |" in table_md and len(table_md.splitlines()) == 2 + 8 + 2  # blank line, legend
    assert table_md.splitlines()[-1].startswith("**bold**: best of the cell")
    assert len(knees) == 3 and knees[0].startswith("(output tok/s grows < 10% per doubling past it): b16: ctx 60")
    bad = cli("compare", *paths, "--baseline", "b128")
    assert bad.returncode == 2
    assert "--baseline b128: no such configuration; choose one of b16, b32, b64" in bad.stderr
    missing = cli("compare", str(tmp / "nope.json"))
    assert missing.returncode == 2 and "nope.json: no such file" in missing.stderr


@pytest.mark.unit
def test_plot_series_come_from_the_inputs(inputs):
    _, paths = inputs
    runs = load_inputs(paths)
    tput = series_vs_concurrency(runs, lambda c: c.throughput.output_tok_s)
    assert tput == {60: {"b16": [(1, 300.0), (32, 4000.0)], "b32": [(1, 360.0), (32, 3600.0)],
                         "b64": [(1, 330.0), (32, 3000.0)]}, 1024: {"b16": [(1, 280.0)]}}
    acc = accept_by_source(runs)
    assert acc[60]["b16"] == {"per_request": (pytest.approx(5.45), 5.4, 5.5)}
    assert acc[60]["b64"] == {"per_request": (pytest.approx(9.05), 9.0, 9.1)}
    assert acc[1024] == {"b16": {"per_request": (5.6, 5.6, 5.6)}}  # b32's failed cell is left out


@pytest.mark.sim
def test_report_writes_pngs_and_handles_missing_power(inputs, tmp_path):
    _, paths = inputs
    out = tmp_path / "plots"
    plots, notes = render(load_inputs(paths))
    written = write_plots(plots, str(out))
    assert sorted(Path(p).name for p in written) == ["accept_length.png", "output_tok_s.png", "pareto.png",
                                                      "power.png", "request_tok_s.png", "speedup.png", "ttft.png"]
    assert all(Path(p).read_bytes()[:8] == PNG and Path(p).stat().st_size > 10_000 for p in written)
    assert notes == ["gpu.png not written: no cell has GPU utilization (--dcgm URL or --nvml)"]  # power, no activity
    bare = tmp_path / "bare"
    bare.mkdir()
    no_power = write(bare, "x", 8, [cell(60, 1, 100.0, 110.0, 0.01, 3.0)])
    res = subprocess.run([sys.executable, "-m", "loadgen", "report", no_power, "--plots", str(bare / "p")],
                         check=False, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert sorted(f.name for f in (bare / "p").iterdir()) == ["accept_length.png", "output_tok_s.png", "pareto.png",
                                                              "request_tok_s.png", "ttft.png"]
    assert "note: power.png not written: no cell has power data (measure with --dcgm URL or --nvml)" in res.stdout
    assert res.stdout.index("100.0") < res.stdout.index("plot: ")  # the table comes first
