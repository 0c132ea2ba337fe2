"""How a plot marks a point whose cell was measured but failed a check (garbage output, a missed SLO, a
saturated client, an output mismatch): a larger hollow marker in the configuration's colour over the point,
and one legend entry per check naming the configurations it marks ("hollow: garbage output (b0: 6 cells)"). The
model says which cells failed which check (`cell_status.failed_checks`); this module only draws it."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from loadgen.report.plot_data import Marks

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.typing import ColorType

MARKER_SIZE = 5.0
HOLLOW_SIZE = 9.0
HOLLOW_EDGE = 1.6
LEGEND_CHARS = 30  # a legend entry's line, so the legend stays within its LEGEND_W_IN


def hollow_points(ax: Axes, points: list[tuple[float, float]], marker: str, color: ColorType) -> None:
    """Draw each (x, y) as a hollow marker, white inside: the point's own filled marker disappears under it."""
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none", marker=marker,
                markersize=HOLLOW_SIZE, markerfacecolor="white", markeredgecolor=color,
                markeredgewidth=HOLLOW_EDGE, zorder=3)


def by_check(marks: Marks) -> dict[str, dict[str, int]]:
    """{check: {configuration: cells marked}} from marks {(config, context, load): 'garbage output, missed SLO'}."""
    out: dict[str, dict[str, int]] = {}
    for (config, *_), names in marks.items():
        for check in names.split(", "):
            counts = out.setdefault(check, {})
            counts[config] = counts.get(config, 0) + 1
    return out


def legend_label(check: str, configs: dict[str, int]) -> str:
    """'hollow: garbage output (b0: 6 cells, b4: 1 cell)', wrapped to LEGEND_CHARS a line."""
    shown = ", ".join(f"{name}: {n} cell{'s' * (n != 1)}" for name, n in configs.items())
    return "\n".join(textwrap.wrap(f"hollow: {check} ({shown})", LEGEND_CHARS))


def marks_legend(marks: Marks) -> dict[str, Artist]:
    """{legend label: handle}: one hollow grey marker per check that marks some point; {} without marks."""
    from matplotlib.lines import Line2D
    return {legend_label(check, configs): Line2D([], [], color="0.3", linestyle="none", marker="o",
                                                 markersize=HOLLOW_SIZE * 0.8, markerfacecolor="white",
                                                 markeredgewidth=HOLLOW_EDGE)
            for check, configs in by_check(marks).items()}
