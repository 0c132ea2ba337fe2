"""The report's legends are clear of every title: for each plot the report draws, from the figure's geometry as
matplotlib laid it out for the PNG, no legend's window extent overlaps the figure's title, a panel's title or
a panel (the per-request decode plot's legend used to cover its two-line title)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.report import plot_axes
from loadgen.report.compare import load_inputs
from loadgen.report.plots import PLOTS, render

pytestmark = pytest.mark.unit


def _cell(ctx: int, conc: int, out: float, rate: float | None = None) -> dict:
    share = min(0.2 + conc / 40, 0.95)
    cats = {"code": {"accept_length": {"value": 5.5, "source": "per_request"}},
            "a-rather-long-category-name": {"accept_length": {"value": 3.1, "source": "per_request"}}}
    cell = {"context_tokens": ctx, "concurrency": conc, "status": "ok", "output_tok_s": out,
            "request_tok_s": {"mean": out / max(conc, 1), "p10": 0.8 * out / max(conc, 1)},
            "ttft_s": {"p50": 0.01 * conc, "p99": 0.03 * conc}, "ttft_from_intended_s": {"p99": 0.04 * conc},
            "requests": {"ok": 64, "failed": 0, "by_outcome": {"ok": 64}},
            "accept_length": {"value": 4.0, "source": "per_request",
                              "per_source": {"per_request": 4.0, "counters": 3.9, "chunks": 3.7}},
            "power": {"gpus": 8, "mean_w_total": 5600 * share, "limit_w_total": 5600.0,
                      "j_per_output_token": 0.4, "power_fraction_of_limit": share},
            "gpu_activity": {"total": {"utilization_percent": 100 * share}}, "bottleneck": "gpu_compute",
            "by_category": cats}
    return cell | ({"request_rate": rate} if rate is not None else {})


def _runs(tmp: Path) -> list:
    paths = []
    for i, name in enumerate(("budget16_topk8_long_name", "budget32_topk8", "b64")):
        cells = [_cell(ctx, conc, (1 + i / 10) * 900 * conc ** 0.7) for ctx in (60, 1024) for conc in (1, 8, 64)]
        cells += [_cell(60, 0, 300.0 * rate, rate=rate) for rate in (2.0, 8.0)]
        path = tmp / f"{name}.json"
        path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name, "cells": cells,
                                    "target": {"server_info": {"sim_speed": 4.0}}}))  # the two-line title
        paths.append(str(path))
    return load_inputs(paths)


def _clashes(fig) -> list[str]:
    """What each legend of `fig` overlaps: the figure's title, a panel's title, a panel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # closed by `finish`: laid out again the same way, on a canvas of its own
    canvas.draw()
    renderer = canvas.get_renderer()
    titles = [("the figure's title", fig._suptitle)] if fig._suptitle is not None else []
    titles += [(f"panel title {ax.get_title()!r}", ax.title) for ax in fig.axes if ax.get_title()]
    found = []
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        box = legend.get_window_extent(renderer)
        found += [f"legend over {what}" for what, text in titles if box.overlaps(text.get_window_extent(renderer))]
        found += [f"legend over a panel ({ax.get_title()!r})" for ax in fig.axes
                  if box.overlaps(ax.get_window_extent(renderer))]
    return found


def test_no_legend_overlaps_a_title_or_a_panel_in_any_plot(tmp_path, monkeypatch):
    figures: list[tuple[str, object]] = []
    finish = plot_axes.finish

    def kept(fig, title, runs, labels=None):  # the figure as laid out for its PNG, kept to read its geometry
        png = finish(fig, title, runs, labels)
        figures.append((title, fig))
        return png
    monkeypatch.setattr(plot_axes, "finish", kept)
    plots, notes = render(_runs(tmp_path))
    assert [p.name for p in plots] == [name for name, *_ in PLOTS], notes  # every plot the report draws
    assert len(figures) == len(PLOTS)
    clashes = {title.split("\n")[0]: found for title, fig in figures if (found := _clashes(fig))}
    assert clashes == {}
