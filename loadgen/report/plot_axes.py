"""The shared look of the report's plots: a log2 load axis with ticks at the measured levels, one legend
below the panels (clear of every title: beside them, a tall legend ran into the figure's title), a colour per configuration kept across every plot, a simulator note in the title, PNG bytes
out. matplotlib is imported inside the functions: `loadgen report` prints its table before it is needed."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loadgen.report.compare import Run
from loadgen.report.plot_data import sim_speed

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.container import Container
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

DPI = 120
PANEL_W_IN = 4.8
PANEL_H_IN = 3.5
LEGEND_W_IN = 2.3  # the room a legend entry takes (and the width added for a figure's title to fit)
LEGEND_H_IN = 0.7


def use_agg() -> None:
    import matplotlib
    matplotlib.use("Agg")


# matplotlib's tab10, spelled out so the page can show the same colours without importing matplotlib
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf")


def config_colors(runs: list[Run]) -> dict[str, ColorType]:
    """One colour per configuration, in input order, the same in every plot (and in the page's tables)."""
    if len(runs) <= len(TAB10):
        return {r.name: TAB10[i] for i, r in enumerate(runs)}
    import matplotlib
    cmap = matplotlib.colormaps["tab20"]
    return {r.name: cmap(i % cmap.N) for i, r in enumerate(runs)}


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def config_markers(runs: list[Run]) -> dict[str, str]:
    """One marker per configuration, so lines that lie on top of each other stay tellable apart."""
    return {r.name: MARKERS[i % len(MARKERS)] for i, r in enumerate(runs)}


def sim_note(runs: list[Run]) -> str | None:
    """'SIMULATED, speed ×20: …' when any input came from the simulator (its time runs faster, so its tok/s
    are inflated and its J/token deflated by that factor); None for real servers only."""
    speeds = sorted({s for r in runs if (s := sim_speed(r)) is not None})
    if not speeds:
        return None
    shown = "/".join(f"×{s:g}" for s in speeds)
    return f"SIMULATED, speed {shown}: tok/s inflated and J/token deflated by that factor"


def figure(columns: int, rows: int = 1, legend: bool = True) -> tuple[Figure, Any]:
    """A constrained-layout figure of rows × columns panels (squeezed to a 2-D array of axes: numpy's, whose
    items matplotlib's types do not name), at the PNG's dpi: a layout measured before saving is the PNG's."""
    import matplotlib.pyplot as plt
    width = PANEL_W_IN * columns + (LEGEND_W_IN if legend else 0.4)
    height = PANEL_H_IN * rows + 0.9 + (LEGEND_H_IN if legend else 0)
    fig, axes = plt.subplots(rows, columns, figsize=(width, height), squeeze=False, layout="constrained", dpi=DPI)
    return fig, axes


def level_axis(ax: Axes, measured: Iterable[float], label: str) -> None:
    """A log2 x axis with one tick per measured level (no minor ticks), a margin around the ends."""
    levels = sorted(set(measured))
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [f"{v:g}" for v in levels])
    ax.minorticks_off()
    low, high = levels[0], levels[-1]
    ax.set_xlim(low / 2 ** 0.4, high * 2 ** 0.4)
    ax.set_xlabel(label)


def value_axis(ax: Axes, label: str, found: Iterable[float | None], log_ratio: float | None = None) -> None:
    """The y axis from 0 with headroom over the highest value (a single point is never clipped at the top
    edge); a log scale instead when `log_ratio` is given and the values span more than that ratio."""
    values = [v for v in found if v is not None and v > 0]
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    if not values:
        return
    if log_ratio is not None and max(values) / min(values) > log_ratio:
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 1.5, max(values) * 1.5)
        return
    ax.set_ylim(0, max(values) * 1.15)


def legend_outside(fig: Figure, entries: Mapping[str, Artist | Container], title: str | None = None) -> None:
    """One legend for the whole figure, below every panel, as many entries a row as LEGEND_W_IN fits in the
    figure's width: {label: handle} (an artist, or a bar plot's container)."""
    if entries:
        per_row = max(1, int(fig.get_figwidth() // LEGEND_W_IN))
        # matplotlib's stubs name artists only; its legend draws a container (bars) through its default handler map
        fig.legend(list(entries.values()), list(entries), loc="outside lower center",  # type: ignore[call-overload]
                   ncols=min(per_row, len(entries)), fontsize=8, title=title, title_fontsize=8, frameon=False)


def finish(fig: Figure, title: str, runs: list[Run], labels: Callable[[Figure], None] | None = None) -> bytes:
    """Title (with the simulator note when the data is simulated), then `labels(fig)`: what is placed once
    everything else is in the figure (labels kept clear of each other, `plot_labels`), then the PNG bytes; the
    figure is closed."""
    import matplotlib.pyplot as plt
    note = sim_note(runs)
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=11)
    if labels:
        labels(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()
