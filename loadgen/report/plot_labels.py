"""Labels that cover no other label: where the plots put their value labels (bars), point labels (Pareto) and
reference-line labels, decided once the figure is laid out, from each label's extent in pixels as matplotlib
measures it. A label goes to the first of its candidate spots that lies inside its panel and covers nothing
already taken (labels placed before it, the markers); a label with no such spot is left out, or, where it must
be shown (a reference line's), put where it covers the fewest. The layout is frozen first (`freeze`), so
what was measured is what the PNG shows.

The geometry (`overlaps`, `inside`, `first_free`) is plain boxes in pixels, tested without matplotlib."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, x0 <= x1 and y0 <= y1


def overlaps(a: Box, b: Box) -> bool:
    """Whether the boxes share an area; boxes that only touch along an edge do not."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(a: Box, frame: Box) -> bool:
    return frame[0] <= a[0] and a[2] <= frame[2] and frame[1] <= a[1] and a[3] <= frame[3]


def any_overlap(boxes: Sequence[Box]) -> bool:
    return any(overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def first_free(candidates: Sequence[Box], taken: Sequence[Box], frame: Box) -> int | None:
    """The index of the first candidate inside `frame` that overlaps no box of `taken`; None when none is."""
    for i, box in enumerate(candidates):
        if inside(box, frame) and not any(overlaps(box, t) for t in taken):
            return i
    return None


def least_covering(candidates: Sequence[Box], taken: Sequence[Box], frame: Box) -> int:
    """The index of the candidate that overlaps the fewest boxes of `taken`, those inside `frame` first; ties go
    to the earlier candidate."""
    return min(range(len(candidates)), key=lambda i: (not inside(candidates[i], frame),
                                                      sum(overlaps(candidates[i], t) for t in taken), i))


def box_of(artist: Artist, renderer: RendererBase) -> Box:
    e = artist.get_window_extent(renderer)
    return (min(e.x0, e.x1), min(e.y0, e.y1), max(e.x0, e.x1), max(e.y0, e.y1))


def renderer_of(fig: Figure) -> RendererBase:
    """The renderer the figure is laid out with (the Agg canvas's, at the figure's dpi)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas: Any = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer: RendererBase = canvas.get_renderer()
    return renderer


def freeze(fig: Figure) -> RendererBase:
    """Lay `fig` out now and keep that layout: what is placed from here on moves no panel, so the extents
    measured now are the PNG's (the figure's dpi is the PNG's, `plot_axes.figure`)."""
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return renderer_of(fig)


def marker_boxes(ax: Axes, renderer: RendererBase) -> list[Box]:
    """The box of every marker drawn in `ax` (each visible line with a marker), in pixels."""
    import numpy as np
    out: list[Box] = []
    for line in ax.get_lines():
        if not line.get_visible() or str(line.get_marker()) in ("None", "none", "", " "):
            continue
        size_pt = float(line.get_markersize()) + float(line.get_markeredgewidth())
        half = float(np.asarray(renderer.points_to_pixels(size_pt))) / 2
        xy = ax.transData.transform(np.asarray(line.get_xydata(), dtype=float))
        out += [(x - half, y - half, x + half, y + half) for x, y in xy if np.isfinite(x) and np.isfinite(y)]
    return out


def others(boxes: Sequence[Box], ax: Axes, xy: tuple[float, float]) -> list[Box]:
    """`boxes` less those centred on the data point `xy` (a point's own markers, which its label may touch)."""
    x, y = ax.transData.transform(xy)
    return [b for b in boxes if abs((b[0] + b[2]) / 2 - x) > 0.5 or abs((b[1] + b[3]) / 2 - y) > 0.5]


def crowded_xticks(ax: Axes, renderer: RendererBase) -> bool:
    """Whether two of the x tick labels `ax` shows overlap."""
    low, high = sorted(ax.get_xlim())
    labels = [t.label1 for t in ax.xaxis.get_major_ticks() if low <= t.get_loc() <= high and t.label1.get_text()]
    return any_overlap([box_of(label, renderer) for label in labels])


@dataclass(frozen=True)
class Spot:
    """Where a label may go: anchored at `xy` (in the annotation's `xycoords`; None: the label's own point),
    shifted by `offset_pt` points, aligned `ha`/`va` there."""

    offset_pt: tuple[float, float]
    ha: Literal["left", "center", "right"] = "left"
    va: Literal["baseline", "bottom", "center", "top"] = "baseline"
    xy: tuple[float, float] | None = None


# around a point, the first as the Pareto plot has always put its labels (up and to the right)
AROUND = (Spot((4, 3)), Spot((-4, 3), "right"), Spot((4, -3), "left", "top"), Spot((-4, -3), "right", "top"),
          Spot((0, 5), "center", "bottom"), Spot((0, -5), "center", "top"), Spot((6, 0), "left", "center"),
          Spot((-6, 0), "right", "center"))


def _move(ann: Annotation, spot: Spot, xy: tuple[float, float]) -> None:
    ann.xy = spot.xy if spot.xy is not None else xy
    ann.xyann = spot.offset_pt
    ann.set_horizontalalignment(spot.ha)
    ann.set_verticalalignment(spot.va)


def place(ax: Axes, text: str, xy: tuple[float, float], spots: Sequence[Spot], taken: list[Box],
          renderer: RendererBase, avoid: Sequence[Box] = (), required: bool = False,
          **style: Any) -> Annotation | None:
    """Annotate `text` at the first spot inside `ax` that covers no box of `taken` (the labels placed so far)
    or `avoid` (markers), and add its box to `taken`. None, and nothing drawn, when every spot covers
    something, unless `required`: then at the spot that covers the fewest. `style` goes to `ax.annotate`
    (xycoords, fontsize, color…)."""
    ann = ax.annotate(text, xy, xytext=(0, 0), textcoords="offset points", **style)
    ann.set_in_layout(False)
    frame = box_of(ax, renderer)
    blocked = [*taken, *avoid]
    boxes = []
    for spot in spots:
        _move(ann, spot, xy)
        boxes.append(box_of(ann, renderer))
        if first_free(boxes[-1:], blocked, frame) is not None:
            taken.append(boxes[-1])
            return ann
    if not required:
        ann.remove()
        return None
    chosen = least_covering(boxes, blocked, frame)
    _move(ann, spots[chosen], xy)
    taken.append(boxes[chosen])
    return ann
