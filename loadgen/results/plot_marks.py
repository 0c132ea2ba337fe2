"""How a plot marks a point whose cell was measured but failed a check (garbage output, a missed SLO, a
saturated client, an output mismatch): a larger hollow marker in the configuration's colour over the point,
and one legend entry per check naming the configurations it marks ("hollow: garbage output (b0, b4)"). The
model says which cells failed which check (`cell_status.failed_checks`); this module only draws it."""

from __future__ import annotations

import textwrap

MARKER_SIZE = 5.0
HOLLOW_SIZE = 9.0
HOLLOW_EDGE = 1.6
LEGEND_CHARS = 30  # a legend entry's line, so the legend stays within its LEGEND_W_IN


def hollow_points(ax, points: list[tuple[float, float]], marker: str, color) -> None:
    """Draw each (x, y) as a hollow marker, white inside: the point's own filled marker disappears under it."""
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none", marker=marker,
                markersize=HOLLOW_SIZE, markerfacecolor="white", markeredgecolor=color,
                markeredgewidth=HOLLOW_EDGE, zorder=3)


def by_check(marks: dict[tuple, str]) -> dict[str, list[str]]:
    """{check: [configuration, …]} from marks {(config, context, load): 'garbage output, missed SLO'}."""
    out: dict[str, list[str]] = {}
    for (config, *_), names in marks.items():
        for check in names.split(", "):
            if config not in out.setdefault(check, []):
                out[check].append(config)
    return out


def legend_label(check: str, configs: list[str]) -> str:
    """'hollow: garbage output (b0, b4)', wrapped to LEGEND_CHARS a line."""
    return "\n".join(textwrap.wrap(f"hollow: {check} ({', '.join(configs)})", LEGEND_CHARS))


def marks_legend(marks: dict[tuple, str]) -> dict:
    """{legend label: handle}: one hollow grey marker per check that marks some point; {} without marks."""
    from matplotlib.lines import Line2D
    return {legend_label(check, configs): Line2D([], [], color="0.3", linestyle="none", marker="o",
                                                 markersize=HOLLOW_SIZE * 0.8, markerfacecolor="white",
                                                 markeredgewidth=HOLLOW_EDGE)
            for check, configs in by_check(marks).items()}
