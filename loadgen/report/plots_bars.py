"""Grouped bar figures: accept length per configuration and per source (sources that disagree show as bars
of different heights side by side), and accept length per prompt category."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loadgen.report import plot_axes as pa
from loadgen.report import plot_labels as pl
from loadgen.report.compare import Run
from loadgen.report.plot_data import prompt_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

Spread = tuple[float, float, float]  # (mean, lowest, highest) over the cells

SOURCE_NAMES = {
    "per_request": "server, per request",
    "counters": "server counters",
    "gauge": "server gauge",
    "log": "server log",
    "chunks": "client tokens/chunk",
}
USED = " (used)"  # after the legend name of a source the tables use


@dataclass(frozen=True)
class Value:
    """A value label: its text, where it stands (x, the top of its whisker, in data units), the group it
    belongs to (its x tick) and the bar it names."""

    x: float
    top: float
    text: str
    group: int
    bar: str


def _bars(ax: Axes, groups: list[str], bars: dict[str, dict[str, Spread]], colors: dict[str, ColorType],
          handles: dict[str, BarContainer]) -> tuple[list[float], list[Value]]:
    """Draw {bar label: {group: (mean, low, high)}} as bars grouped on the x axis; returns the highs and the
    value labels, placed once the figure is laid out (`_value_labels`)."""
    n = max(len(bars), 1)
    width = 0.8 / n
    highs: list[float] = []
    values: list[Value] = []
    for i, (label, by_group) in enumerate(bars.items()):
        at = [(g, g + (i - (n - 1) / 2) * width) for g, name in enumerate(groups) if name in by_group]
        vals = [by_group[name] for name in groups if name in by_group]
        if not at:
            continue
        # max(0, …): the mean of equal values can round a hair past them, and matplotlib refuses a negative error
        err = [[max(0.0, v[0] - v[1]) for v in vals], [max(0.0, v[2] - v[0]) for v in vals]]
        handles[label] = ax.bar([x for _, x in at], [v[0] for v in vals], width * 0.92, yerr=err, capsize=2,
                                color=colors[label], error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
        values += [Value(x, v[2], f"{v[0]:.2f}", g, label) for (g, x), v in zip(at, vals)]
        highs += [v[2] for v in vals]
    long = max(map(len, groups)) > 10
    ax.set_xticks(range(len(groups)), groups, rotation=20 if long else 0, ha="right" if long else "center",
                  fontsize=8)
    return highs, values


def _per_group(values: list[Value], shown: Sequence[str]) -> list[Value]:
    """One label a group, over its highest whisker: the value of the group's first bar named in `shown`; a
    group with none of them gets no label."""
    out = []
    for group in sorted({v.group for v in values}):
        mine = [v for v in values if v.group == group]
        pick = next((v for name in shown for v in mine if v.bar == name), None)
        if pick:
            out.append(Value(group, max(v.top for v in mine), pick.text, group, pick.bar))
    return out


def _try_labels(ax: Axes, values: list[Value], rotation: int, renderer: RendererBase) -> bool:
    """Annotate every value (upright, or turned 90°); keep them when all lie inside the panel and none
    overlaps another, else remove them all."""
    upright = rotation == 0
    anns = [ax.annotate(v.text, (v.x, v.top), xytext=(0, 2), textcoords="offset points", ha="center",
                        va="baseline" if upright else "bottom", rotation=rotation, fontsize=6.5) for v in values]
    boxes = [pl.box_of(a, renderer) for a in anns]
    frame = pl.box_of(ax, renderer)
    if all(pl.inside(b, frame) for b in boxes) and not pl.any_overlap(boxes):
        return True
    for a in anns:
        a.remove()
    return False


def _value_labels(ax: Axes, values: list[Value], shown: Sequence[str], renderer: RendererBase) -> list[str]:
    """Label the bars as densely as fits without two labels overlapping: every bar upright (as with few
    configurations), every bar turned 90°, then one label a group (the bar named first in `shown`: the
    source the tables use) upright or turned; none when nothing fits. Returns the bars a group's label shows
    when they are one a group, for the axis label; [] otherwise."""
    for rotation in (0, 90):
        if _try_labels(ax, values, rotation, renderer):
            return []
    group_values = _per_group(values, shown)
    for rotation in (0, 90):
        if group_values and _try_labels(ax, group_values, rotation, renderer):
            return list(dict.fromkeys(v.bar for v in group_values))
    return []


def _settle(fig: Figure, panels: list[tuple[Axes, list[Value]]], shown: Sequence[str], xlabel: str) -> None:
    """Once the figure holds everything else: the layout is frozen (x tick labels that overlap are turned 90°
    first, and the figure laid out again), then the value labels go in (`_value_labels`); the axis label says
    which bar a group's label shows."""
    renderer = pl.freeze(fig)
    crowded = [ax for ax, _ in panels if pl.crowded_xticks(ax, renderer)]
    for ax in crowded:
        ax.set_xticks(ax.get_xticks(), [t.get_text() for t in ax.get_xticklabels()], rotation=90, ha="center",
                      fontsize=8)
    if crowded:
        fig.set_layout_engine("constrained")
        renderer = pl.freeze(fig)
    for ax, values in panels:
        if per_group := _value_labels(ax, values, shown, renderer):
            ax.set_xlabel(f"{xlabel} (labels: {', '.join(bar.removesuffix(USED) for bar in per_group)})")


def _source_colors(sources: list[str]) -> dict[str, ColorType]:
    import matplotlib
    cmap = matplotlib.colormaps["Set2"]
    return {s: cmap(i % cmap.N) for i, s in enumerate(sources)}


def accept_sources(runs: list[Run], data: dict[int, dict[str, dict[str, Spread]]], used: list[str]) -> bytes:
    """One panel per prompt length: per configuration, one bar per accept-length source (mean over the
    cells, whiskers lowest to highest cell)."""
    contexts = sorted(data)
    fig, axes = pa.figure(len(contexts))
    configs = [r.name for r in runs]
    sources = list(dict.fromkeys(s for by in data.values() for per in by.values() for s in per))
    labels = {s: SOURCE_NAMES.get(s, s) + (USED if s in used else "") for s in sources}
    colors = _source_colors([labels[s] for s in sources])
    handles: dict[str, BarContainer] = {}
    panels = []
    for ax, ctx in zip(axes[0], contexts):
        groups = [c for c in configs if c in data[ctx]]
        bars = {labels[s]: {c: data[ctx][c][s] for c in groups if s in data[ctx][c]} for s in sources}
        highs, values = _bars(ax, groups, bars, colors, handles)
        panels.append((ax, values))
        ax.set_title(prompt_label(ctx), fontsize=10)
        ax.set_xlabel("configuration")
        pa.value_axis(ax, "accept length (tokens / verify step)", highs)
    pa.legend_outside(fig, handles, title="source")
    shown = [labels[s] for s in sources if s in used]
    return pa.finish(fig, "Accept length per configuration and source\n(mean over cells; whiskers: lowest to "
                     "highest cell)", runs, lambda fig: _settle(fig, panels, shown, "configuration"))


def accept_categories(runs: list[Run], data: dict[str, dict[str, Spread]]) -> bytes:
    """Per prompt category, one bar per configuration (the configuration's colour from the other plots)."""
    categories = sorted({cat for by in data.values() for cat in by})
    colors = pa.config_colors(runs)
    bars = {r.name: data[r.name] for r in runs if r.name in data}
    fig, axes = pa.figure(1)
    width_in = max(pa.PANEL_W_IN, 0.25 * len(categories) * (len(bars) + 1))
    fig.set_size_inches(width_in + pa.LEGEND_W_IN, pa.PANEL_H_IN + 0.9)
    ax = axes[0][0]
    handles: dict[str, BarContainer] = {}
    highs, values = _bars(ax, categories, bars, colors, handles)
    ax.set_xlabel("prompt category")
    pa.value_axis(ax, "accept length (tokens / verify step)", highs)
    pa.legend_outside(fig, handles, title="configuration")
    return pa.finish(fig, "Accept length per prompt category\n(mean over cells; whiskers: lowest to highest "
                     "cell)", runs, lambda fig: _settle(fig, [(ax, values)], [], "prompt category"))
