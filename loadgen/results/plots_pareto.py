"""pareto.png: per-request tok/s (interactivity) against aggregate output tok/s, a panel per prompt length,
a line per configuration through its concurrencies (each point labelled with its concurrency), the Pareto
frontier over all of them (with targets: over the cells that met them), and the SLO marked: a TPOT target as the interactivity it implies (1 / TPOT), cells
that met every target filled, those that missed hollow."""

from __future__ import annotations

from loadgen.results import plot_axes as pa
from loadgen.results.compare import Run
from loadgen.results.pareto import frontier, points, targets_of
from loadgen.results.plot_data import prompt_label


def _draw(ax, pts, colors, markers, handles) -> None:
    for name in dict.fromkeys(p.config for p in pts):
        mine = sorted((p for p in pts if p.config == name), key=lambda p: p.concurrency)
        line, = ax.plot([p.request_tok_s for p in mine], [p.output_tok_s for p in mine], color=colors[name],
                        linewidth=1, alpha=0.7)
        handles.setdefault(name, line)
        for p in mine:
            ax.plot(p.request_tok_s, p.output_tok_s, marker=markers[name], markersize=6, color=colors[name],
                    markerfacecolor="none" if p.met is False else colors[name], linestyle="none")
            ax.annotate(f"{p.concurrency}", (p.request_tok_s, p.output_tok_s), xytext=(4, 3),
                        textcoords="offset points", fontsize=7, color="0.25")
    judged = any(p.met is not None for p in pts)
    best = frontier([p for p in pts if p.met] if judged else pts)
    edge, = ax.plot([p.request_tok_s for p in best], [p.output_tok_s for p in best], color="black",
                    linestyle="--", linewidth=1.2, drawstyle="steps-post")
    handles.setdefault("frontier (met)" if judged else "Pareto frontier", edge)


def _targets(ax, targets: dict, handles: dict) -> None:
    from matplotlib.lines import Line2D
    tpot = targets.get("tpot")
    if tpot:
        ax.axvline(1 / tpot, color="tab:red", linestyle=":", linewidth=1.2)
        handles.setdefault(f"1/tpot ({1 / tpot:.0f} tok/s)",
                           Line2D([], [], color="tab:red", linestyle=":"))
    if targets:
        handles.setdefault("met SLO", Line2D([], [], color="0.3", marker="o", linestyle="none"))
        handles.setdefault("missed SLO", Line2D([], [], color="0.3", marker="o", markerfacecolor="none",
                                                    linestyle="none"))


def pareto(runs: list[Run]) -> bytes | None:
    data = points(runs)
    if not data:
        return None
    targets = targets_of(runs)
    colors, markers = pa.config_colors(runs), pa.config_markers(runs)
    fig, axes = pa.figure(len(data))  # as wide as the other plots: the title and its simulator note fit
    handles: dict = {}
    shown = ", ".join(f"{m} ≤ {t * 1e3:g} ms" for m, t in targets.items())
    for ax, (ctx, pts) in zip(axes[0], sorted(data.items())):
        _draw(ax, pts, colors, markers, handles)
        _targets(ax, targets, handles)
        ax.set_title(prompt_label(ctx) + (f" · SLO {shown}" if shown else ""), fontsize=9)
        ax.set_xlabel("per-request tok/s (interactivity, mean); labels: concurrency")
        pa.value_axis(ax, "aggregate output tok/s", [p.output_tok_s for p in pts])
        xs = [p.request_tok_s for p in pts] + ([1 / targets["tpot"]] if targets.get("tpot") else [])
        ax.set_xlim(min(xs) * 0.85, max(xs) * 1.1)
    # below the panels: beside them, a long legend would run into the title of a one-panel figure
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(4, len(handles)),
               fontsize=8, frameon=False)
    return pa.finish(fig, "Interactivity vs throughput", runs)
