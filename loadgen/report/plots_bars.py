"""Grouped bar figures: accept length per configuration and per source (sources that disagree show as bars
of different heights side by side), and accept length per prompt category."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.report import plot_axes as pa
from loadgen.report.compare import Run
from loadgen.report.plot_data import prompt_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer
    from matplotlib.typing import ColorType

Spread = tuple[float, float, float]  # (mean, lowest, highest) over the cells

SOURCE_NAMES = {
    "per_request": "server, per request",
    "counters": "server counters",
    "gauge": "server gauge",
    "log": "server log",
    "chunks": "client tokens/chunk",
}


def _bars(ax: Axes, groups: list[str], bars: dict[str, dict[str, Spread]], colors: dict[str, ColorType],
          handles: dict[str, BarContainer]) -> list[float]:
    """Draw {bar label: {group: (mean, low, high)}} as bars grouped on the x axis; returns the highs."""
    n = max(len(bars), 1)
    width = 0.8 / n
    highs: list[float] = []
    for i, (label, by_group) in enumerate(bars.items()):
        xs = [g + (i - (n - 1) / 2) * width for g, name in enumerate(groups) if name in by_group]
        vals = [by_group[name] for name in groups if name in by_group]
        if not xs:
            continue
        # max(0, …): the mean of equal values can round a hair past them, and matplotlib refuses a negative error
        err = [[max(0.0, v[0] - v[1]) for v in vals], [max(0.0, v[2] - v[0]) for v in vals]]
        handles[label] = ax.bar(xs, [v[0] for v in vals], width * 0.92, yerr=err, capsize=2,
                                color=colors[label], error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
        for x, v in zip(xs, vals):
            ax.annotate(f"{v[0]:.2f}", (x, v[2]), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize=6.5)
        highs += [v[2] for v in vals]
    ax.set_xticks(range(len(groups)), groups, rotation=20 if max(map(len, groups)) > 10 else 0, ha="right"
                  if max(map(len, groups)) > 10 else "center", fontsize=8)
    return highs


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
    labels = {s: SOURCE_NAMES.get(s, s) + (" (used)" if s in used else "") for s in sources}
    colors = _source_colors([labels[s] for s in sources])
    handles: dict[str, BarContainer] = {}
    for ax, ctx in zip(axes[0], contexts):
        groups = [c for c in configs if c in data[ctx]]
        bars = {labels[s]: {c: data[ctx][c][s] for c in groups if s in data[ctx][c]} for s in sources}
        highs = _bars(ax, groups, bars, colors, handles)
        ax.set_title(prompt_label(ctx), fontsize=10)
        ax.set_xlabel("configuration")
        pa.value_axis(ax, "accept length (tokens / verify step)", highs)
    pa.legend_outside(fig, handles, title="source")
    return pa.finish(fig, "Accept length per configuration and source\n(mean over cells; whiskers: lowest to "
                     "highest cell)", runs)


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
    highs = _bars(ax, categories, bars, colors, handles)
    ax.set_xlabel("prompt category")
    pa.value_axis(ax, "accept length (tokens / verify step)", highs)
    pa.legend_outside(fig, handles, title="configuration")
    return pa.finish(fig, "Accept length per prompt category\n(mean over cells; whiskers: lowest to highest "
                     "cell)", runs)
