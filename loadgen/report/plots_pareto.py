"""pareto.png: per-request tok/s (interactivity) against aggregate output tok/s, a panel per prompt length,
a line per configuration through its concurrencies (each point labelled with its concurrency where the label
covers no other label and no marker: the frontier's points first, `plot_labels`), the Pareto frontier over the
points whose cells passed their checks, and the SLO marked: a TPOT target as the interactivity it implies
(1 / TPOT). A cell that failed a check (missed the SLO, garbage output, a saturated client) is drawn hollow, the
legend naming the check and the configurations (`plot_marks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.report import plot_axes as pa
from loadgen.report import plot_labels as pl
from loadgen.report.compare import Run
from loadgen.report.pareto import Point, frontier, points, targets_of
from loadgen.report.plot_data import prompt_label
from loadgen.report.plot_marks import MARKER_SIZE, hollow_points, marks_legend

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType


def _draw(ax: Axes, pts: list[Point], colors: dict[str, ColorType], markers: dict[str, str],
          handles: dict[str, Artist]) -> list[Point]:
    """Lines, points and the frontier; returns the frontier's points."""
    for name in dict.fromkeys(p.config for p in pts):
        mine = sorted((p for p in pts if p.config == name), key=lambda p: p.concurrency)
        line, = ax.plot([p.request_tok_s for p in mine], [p.output_tok_s for p in mine], color=colors[name],
                        linewidth=1, alpha=0.7)
        handles.setdefault(name, line)
        ax.plot([p.request_tok_s for p in mine], [p.output_tok_s for p in mine], marker=markers[name],
                markersize=MARKER_SIZE * 1.2, color=colors[name], linestyle="none")
        hollow_points(ax, [(p.request_tok_s, p.output_tok_s) for p in mine if p.checks], markers[name],
                      colors[name])
    checked = any(p.checks for p in pts) or any(p.met is not None for p in pts)
    best = frontier([p for p in pts if not p.checks])
    edge, = ax.plot([p.request_tok_s for p in best], [p.output_tok_s for p in best], color="black",
                    linestyle="--", linewidth=1.2, drawstyle="steps-post")
    handles.setdefault("frontier (passed checks)" if checked else "Pareto frontier", edge)
    return best


def _concurrency_labels(fig: Figure, panels: list[tuple[Axes, list[Point], list[Point]]]) -> None:
    """Once the figure is laid out: each point's concurrency beside it, where it covers no other label and no
    other point's marker (the frontier's points first, then in drawing order); a crowded point goes unlabelled."""
    renderer = pl.freeze(fig)
    for ax, pts, best in panels:
        markers = pl.marker_boxes(ax, renderer)
        taken: list[pl.Box] = []
        for p in sorted(pts, key=lambda p: p not in best):  # stable: the frontier first, each in drawing order
            xy = (p.request_tok_s, p.output_tok_s)
            pl.place(ax, f"{p.concurrency}", xy, pl.AROUND, taken, renderer, avoid=pl.others(markers, ax, xy),
                     fontsize=7, color="0.25")


def _targets(ax: Axes, targets: dict[str, float], handles: dict[str, Artist]) -> None:
    from matplotlib.lines import Line2D
    tpot = targets.get("tpot")
    if tpot:
        ax.axvline(1 / tpot, color="tab:red", linestyle=":", linewidth=1.2)
        handles.setdefault(f"1/tpot ({1 / tpot:.0f} tok/s)",
                           Line2D([], [], color="tab:red", linestyle=":"))


def pareto(runs: list[Run]) -> bytes | None:
    data = points(runs)
    if not data:
        return None
    targets = targets_of(runs)
    colors, markers = pa.config_colors(runs), pa.config_markers(runs)
    fig, axes = pa.figure(len(data))  # as wide as the other plots: the title and its simulator note fit
    handles: dict[str, Artist] = {}
    panels = []
    shown = ", ".join(f"{m} ≤ {t * 1e3:g} ms" for m, t in targets.items())
    for ax, (ctx, pts) in zip(axes[0], sorted(data.items())):
        panels.append((ax, pts, _draw(ax, pts, colors, markers, handles)))
        _targets(ax, targets, handles)
        ax.set_title(prompt_label(ctx) + (f" · SLO {shown}" if shown else ""), fontsize=9)
        ax.set_xlabel("per-request tok/s (interactivity, mean); labels: concurrency")
        pa.value_axis(ax, "aggregate output tok/s", [p.output_tok_s for p in pts])
        xs = [p.request_tok_s for p in pts] + ([1 / targets["tpot"]] if targets.get("tpot") else [])
        ax.set_xlim(min(xs) * 0.85, max(xs) * 1.1)
    handles |= marks_legend({(p.config, ctx, p.concurrency): p.checks for ctx, pts in data.items() for p in pts
                             if p.checks})
    pa.legend_outside(fig, handles)
    return pa.finish(fig, "Interactivity vs throughput", runs, lambda fig: _concurrency_labels(fig, panels))
