"""Figures against the load: a grid of panels, one column per prompt length, one row per figure, one line per
configuration (its colour kept across plots), the load on a log2 axis ticked at the measured levels.

A row holds layers (e.g. TTFT p50 solid, p99 dashed); a layer's points may carry a lower band edge
(per-request tok/s: mean with the p10 band), and a row may carry a reference line (the power limit).
A point whose cell was measured but failed a check (`plot_data.check_marks`) is drawn hollow, larger, and the
legend names the checks and the configurations (`plot_marks`). A reference line's label goes where it covers
no marker once the figure is laid out (`plot_labels`): at the left end above the line when free, as always."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadgen.report import plot_axes as pa
from loadgen.report import plot_labels as pl
from loadgen.report.compare import Run
from loadgen.report.plot_data import Marks, prompt_label
from loadgen.report.plot_marks import MARKER_SIZE, hollow_points, marks_legend

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType, LineStyleType

Series = Mapping[int, Mapping[str, Sequence[tuple[Any, ...]]]]  # {context: {config: [(x, y[, band_low]), …]}}
Look = tuple[dict[str, "ColorType"], dict[str, str], Marks]  # the colours, markers and marks of the plot


@dataclass(frozen=True)
class Layer:
    """{context: {config: [(x, y) or (x, y, band_low), …]}} drawn in one line style."""

    series: Series
    style: LineStyleType = "-"
    name: str = ""


@dataclass(frozen=True)
class Row:
    ylabel: str
    layers: list[Layer]
    log_ratio: float | None = None
    reference: tuple[float, str] | None = None
    band_name: str = ""


def contexts_of(rows: list[Row]) -> list[int]:
    return sorted({ctx for row in rows for layer in row.layers for ctx in layer.series})


def _draw_layer(ax: Axes, layer: Layer, ctx: int, look: Look,
                handles: dict[str, Artist]) -> tuple[list[float], list[float]]:
    colors, markers, marks = look
    xs_all: list[float] = []
    ys_all: list[float] = []
    for name, pts in layer.series.get(ctx, {}).items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        size = MARKER_SIZE if layer.style == "-" else MARKER_SIZE * 0.7  # p99 and the like: smaller, dashed
        line, = ax.plot(xs, ys, linestyle=layer.style, marker=markers[name], markersize=size, color=colors[name])
        handles.setdefault(name, line)
        hollow_points(ax, [(x, y) for x, y in zip(xs, ys) if (name, ctx, x) in marks], markers[name], colors[name])
        if pts and len(pts[0]) > 2:
            lows = [y if p[2] is None else p[2] for p, y in zip(pts, ys)]
            ax.fill_between(xs, lows, ys, color=colors[name], alpha=0.14, linewidth=0)
            ax.plot(xs, lows, linestyle=":", linewidth=1, color=colors[name])
            ys_all += lows
        xs_all += xs
        ys_all += ys
    return xs_all, ys_all


def _draw_panel(ax: Axes, row: Row, ctx: int, look: Look, handles: dict[str, Artist], x_label: str) -> None:
    xs: list[float] = []
    ys: list[float] = []
    for layer in row.layers:
        lx, ly = _draw_layer(ax, layer, ctx, look, handles)
        xs, ys = xs + lx, ys + ly
    if row.reference:
        value, _ = row.reference
        ax.axhline(value, color="0.35", linestyle="--", linewidth=1)
        ys.append(value)
    if xs:
        pa.level_axis(ax, xs, x_label)
    else:
        ax.text(0.5, 0.5, "no measured cell", ha="center", va="center", transform=ax.transAxes, color="0.4")
    pa.value_axis(ax, row.ylabel, ys, row.log_ratio)


def _reference_spots(value: float) -> list[pl.Spot]:
    """Along the line at `value` (x in axes fraction): its left end above it (where its label has always
    been), the right end, below them, then above or below every tenth of the way."""
    ends = [pl.Spot((0, 3), "left", "baseline", (0.01, value)), pl.Spot((0, 3), "right", "baseline", (0.99, value)),
            pl.Spot((0, -3), "left", "top", (0.01, value)), pl.Spot((0, -3), "right", "top", (0.99, value))]
    between = [spot for f in range(1, 10) for spot in (pl.Spot((0, 3), "center", "baseline", (f / 10, value)),
                                                         pl.Spot((0, -3), "center", "top", (f / 10, value)))]
    return ends + between


def _reference_labels(fig: Figure, panels: list[tuple[Axes, tuple[float, str]]]) -> None:
    """Once the figure is laid out: each reference line's label at the first spot along it that covers no
    marker (at the one covering the fewest when every spot does: the label is always shown)."""
    renderer = pl.freeze(fig)
    for ax, (value, label) in panels:
        pl.place(ax, label, (0.01, value), _reference_spots(value), [], renderer, avoid=pl.marker_boxes(ax, renderer),
                 required=True, xycoords=("axes fraction", "data"), fontsize=7, color="0.3")


def _style_entries(rows: list[Row]) -> dict[str, Artist]:
    from matplotlib.lines import Line2D
    entries: dict[str, Artist] = {}
    for row in rows:
        for layer in row.layers:
            if layer.name:
                size = MARKER_SIZE if layer.style == "-" else MARKER_SIZE * 0.7
                entries[layer.name] = Line2D([], [], color="0.3", linestyle=layer.style, marker="o", markersize=size)
        if row.band_name:
            from matplotlib.patches import Patch
            entries[row.band_name] = Patch(color="0.3", alpha=0.2)
    return entries


def grid(runs: list[Run], rows: list[Row], title: str, x_label: str, marks: Marks | None = None) -> bytes:
    """The PNG of rows × prompt-length panels; legend (configurations, line styles, then the hollow points'
    checks) outside. `marks`: the points whose cells failed a check (`plot_data.check_marks`)."""
    colors = pa.config_colors(runs)
    contexts = contexts_of(rows)
    marks = marks or {}
    fig, axes = pa.figure(len(contexts), len(rows))
    handles: dict[str, Artist] = {}
    references = []
    for i, row in enumerate(rows):
        for j, ctx in enumerate(contexts):
            _draw_panel(axes[i][j], row, ctx, (colors, pa.config_markers(runs), marks), handles, x_label)
            if i == 0:
                axes[i][j].set_title(prompt_label(ctx), fontsize=10)
            if row.reference:
                references.append((axes[i][j], row.reference))
    ordered = {name: handles[name] for name in colors if name in handles}
    drawn = {(name, ctx, p[0]) for row in rows for layer in row.layers for ctx, by in layer.series.items()
             for name, pts in by.items() for p in pts}
    shown = {k: v for k, v in marks.items() if k in drawn}
    pa.legend_outside(fig, ordered | _style_entries(rows) | marks_legend(shown), title="configuration")
    return pa.finish(fig, title, runs, (lambda fig: _reference_labels(fig, references)) if references else None)
