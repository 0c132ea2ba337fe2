"""No label of the report's plots covers another: the box geometry of `plot_labels` as tables, then every plot
of a 16-configuration report (5 accept-length sources that nearly agree, throughput points that crowd at the
highest concurrency, as a real sweep's do) drawn as its PNG is, with the extent of every text matplotlib drew
(value and point labels, tick labels, titles, legends, reference-line labels): no two overlap, none leaves the
figure, no Pareto label covers another point's marker. With a few configurations the labels stay where they
always were: every bar and every point labelled, at the spot they had before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.report import plot_axes
from loadgen.report import plot_labels as pl
from loadgen.report.compare import load_inputs
from loadgen.report.plots import PLOTS, render

pytestmark = pytest.mark.unit

CONFIGS_16 = [f"b{b}_t{t}" for b in (4, 8, 16, 32) for t in (1, 2, 4, 8)]
SOURCES = ("per_request", "counters", "gauge", "log", "chunks")


@pytest.mark.parametrize("a, b, expected", [
    ((0, 0, 10, 10), (5, 5, 15, 15), True),
    ((0, 0, 10, 10), (10, 0, 20, 10), False),  # edges that touch share no area
    ((0, 0, 10, 10), (0, 10, 10, 20), False),
    ((0, 0, 10, 10), (11, 0, 20, 10), False),
    ((0, 0, 10, 10), (2, 2, 3, 3), True),  # one inside the other
    ((0, 0, 10, 10), (9.5, -5, 30, 0.5), True),
])
def test_overlaps(a, b, expected):
    assert pl.overlaps(a, b) is expected
    assert pl.overlaps(b, a) is expected


@pytest.mark.parametrize("box, expected", [
    ((1, 1, 9, 9), True), ((0, 0, 10, 10), True), ((-1, 1, 9, 9), False), ((1, 1, 9, 10.5), False),
])
def test_inside(box, expected):
    assert pl.inside(box, (0, 0, 10, 10)) is expected


@pytest.mark.parametrize("candidates, taken, first, least", [
    ([(0, 0, 4, 4), (5, 5, 9, 9)], [], 0, 0),
    ([(0, 0, 4, 4), (5, 5, 9, 9)], [(1, 1, 2, 2)], 1, 1),
    ([(0, 0, 4, 4), (5, 5, 9, 9), (20, 20, 24, 24)], [(1, 1, 2, 2), (6, 6, 7, 7)], None, 0),  # 3rd lies outside
    ([(0, 0, 4, 4), (5, 5, 9, 9)], [(1, 1, 2, 2), (3, 3, 4, 4), (6, 6, 7, 7)], None, 1),
])
def test_first_free_and_least_covering(candidates, taken, first, least):
    frame = (0, 0, 10, 10)
    assert pl.first_free(candidates, taken, frame) == first
    assert pl.least_covering(candidates, taken, frame) == least


def _cell(i: int, ctx: int, conc: int, rate: float | None = None) -> dict:
    accept = 2.3 + 0.45 * i
    load = conc or rate or 1  # open-loop cells by their rate
    # the throughput of every configuration crowds at the highest load, as the simulator's does
    spread = 1 + (i - 7.5) / 7.5 * (0.6 if load < 8 else 0.25 if load < 32 else 0.08)
    out = 900 * load ** 0.8 * spread * (1 + 0.3 * (ctx == 60))
    share = min(0.2 + load / 40 + i / 100, 0.95)
    per_source = {s: round(accept + 0.01 * k, 3) for k, s in enumerate(SOURCES)}  # all nearly agree
    cats = {"code": {"accept_length": {"value": accept + 0.5, "source": "per_request"}},
            "a-rather-long-category-name": {"accept_length": {"value": accept - 0.2, "source": "per_request"}}}
    cell = {"context_tokens": ctx, "concurrency": conc, "status": "ok", "output_tok_s": out,
            "request_tok_s": {"mean": out / load, "p10": 0.8 * out / load},
            "ttft_s": {"p50": 0.001 * load * spread, "p99": 0.003 * load * spread},
            "ttft_from_intended_s": {"p99": 0.004 * load * spread},
            "requests": {"ok": 64, "failed": 0, "by_outcome": {"ok": 64}},
            "accept_length": {"value": accept, "source": "per_request", "per_source": per_source},
            "power": {"gpus": 8, "mean_w_total": 5600 * share, "limit_w_total": 5600.0,
                      "j_per_output_token": 40 / out ** 0.5, "power_fraction_of_limit": share},
            "gpu_activity": {"total": {"utilization_percent": 100 * share}}, "bottleneck": "gpu_compute",
            "by_category": cats}
    return cell | ({"request_rate": rate} if rate is not None else {})


def _runs(tmp: Path, configs: dict[str, int], contexts: tuple[int, ...] = (60, 1024)) -> list:
    """Results files of {name: i}: the i-th of 16 configurations' figures (accept length 2.3 + 0.45 i)."""
    paths = []
    for name, i in configs.items():
        cells = [_cell(i, ctx, conc) for ctx in contexts for conc in (1, 8, 32)]
        cells += [_cell(i, 60, 0, rate=rate) for rate in (2.0, 8.0)]
        path = tmp / f"{name}.json"
        path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name, "cells": cells,
                                    "target": {"server_info": {"sim_speed": 4.0}}}))
        paths.append(str(path))
    return load_inputs(paths)


def _figures(runs: list) -> dict[str, object]:
    """{file name: the figure as laid out for its PNG}, for every plot the report draws."""
    kept: list[object] = []
    finish = plot_axes.finish

    def keep(fig, title, runs, labels=None):
        png = finish(fig, title, runs, labels)
        kept.append(fig)
        return png
    with pytest.MonkeyPatch.context() as m:
        m.setattr(plot_axes, "finish", keep)
        plots, notes = render(runs)
    assert [p.name for p in plots] == [name for name, *_ in PLOTS], notes
    return {p.name: fig for p, fig in zip(plots, kept)}


@pytest.fixture(scope="module")
def report_16(tmp_path_factory) -> dict[str, object]:
    return _figures(_runs(tmp_path_factory.mktemp("report16"), {name: i for i, name in enumerate(CONFIGS_16)}))


@pytest.fixture(scope="module")
def report_2(tmp_path_factory) -> dict[str, object]:
    """Two configurations far apart (the 1st and the 16th of the 16): no label is in another's way. One prompt
    length: a panel a figure (row) is enough to see where the labels go."""
    return _figures(_runs(tmp_path_factory.mktemp("report2"), {"b8_t4": 0, "b64_t8": 15}, contexts=(1024,)))


def _drawn_texts(fig) -> tuple[list, object]:
    """Every text matplotlib draws for `fig` (shown and not empty), and the renderer, from a fresh draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    drawn: dict[int, Text] = {}
    draw = Text.draw

    def spy(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn[id(self)] = self
        return draw(self, renderer)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Text, "draw", spy)
        canvas = FigureCanvasAgg(fig)  # closed by `finish`: drawn again as laid out, on a canvas of its own
        canvas.draw()
    return list(drawn.values()), canvas.get_renderer()


def _collisions(fig) -> list[str]:
    """Each pair of drawn texts that overlap, and each text that leaves the figure."""
    texts, renderer = _drawn_texts(fig)
    boxes = [(t.get_text(), pl.box_of(t, renderer)) for t in texts]
    width, height = fig.canvas.get_width_height()
    found = [f"{a!r} over {b!r}" for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if pl.overlaps(ba, bb)]
    return found + [f"{a!r} leaves the figure" for a, box in boxes if not pl.inside(box, (0, 0, width, height))]


def test_no_label_of_a_16_configuration_report_covers_another(report_16):
    collisions = {name: found for name, fig in report_16.items() if (found := _collisions(fig))}
    assert collisions == {}


def _annotations(ax) -> list:
    from matplotlib.text import Annotation
    return [t for t in ax.texts if isinstance(t, Annotation)]


def test_16_configurations_keep_a_value_label_a_configuration(report_16):
    for ax in report_16["accept_length.png"].axes:
        # 80 bars to a panel: one label a configuration, the value of the source the tables use
        assert [a.get_text() for a in _annotations(ax)] == [f"{2.3 + 0.45 * i:.2f}" for i in range(16)]
        assert ax.get_xlabel() == "configuration (labels: server, per request)"
        assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())  # upright, the names ran together


def test_pareto_labels_cover_no_other_point(report_16):
    fig = report_16["pareto.png"]
    _, renderer = _drawn_texts(fig)
    for ax in fig.axes:
        labels = _annotations(ax)
        assert 6 <= len(labels) < 48  # the crowded ones left out, not all of them
        markers = pl.marker_boxes(ax, renderer)
        for label in labels:
            box = pl.box_of(label, renderer)
            assert not any(pl.overlaps(box, m) for m in pl.others(markers, ax, label.xy)), label.get_text()


def test_few_configurations_label_every_bar_and_point_where_they_always_were(report_2):
    figures = report_2
    for ax in figures["accept_length.png"].axes:
        assert len(_annotations(ax)) == 2 * len(SOURCES)  # every bar, upright
        assert {a.get_rotation() for a in _annotations(ax)} == {0}
        assert ax.get_xlabel() == "configuration"
    for ax in figures["accept_categories.png"].axes:
        assert len(_annotations(ax)) == 2 * 2
    for ax in figures["pareto.png"].axes:
        labels = _annotations(ax)
        assert len(labels) == 2 * 3 and {label.xyann for label in labels} == {(4, 3)}
    for name, lines in (("speedup.png", 2), ("power.png", 1), ("gpu.png", 2)):  # power: the limit, top row
        refs = [label for ax in figures[name].axes for label in _annotations(ax)]
        assert len(refs) == lines and all(label.xy[0] in (0.01, 0.99) for label in refs)  # at an end of its line
    assert {name: found for name, fig in figures.items() if (found := _collisions(fig))} == {}
