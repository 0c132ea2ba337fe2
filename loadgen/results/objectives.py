"""What a verdict across configurations can be asked to decide: each objective's figure (an entry of the catalog,
`metrics/catalog.py`, which says where a cell holds it and which way is better), its words and unit, and where
its 95 % interval comes from (definitions.md#verdict)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from loadgen.metrics.catalog import FIGURES
from loadgen.names import Better
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_view import number

STEADY_SHARE = 0.5


def sustained_output_tok_s(cell: CellResult) -> float | None:
    """Output tok/s the server sustains at the cell's load: the steady window's (`steady.output_tok_s`: every
    slot busy, definitions.md#steady) where the cell has one covering at least `STEADY_SHARE` of its window, else
    the whole window's. Why: the whole window holds the ramps (slots starting together, falling idle one by one
    at the end), whose share varies with the cell's size and from run to run: two runs of one configuration at
    c=32 (96 requests) read up to 4 % apart over the whole window and 0.2-0.8 % apart in the steady window."""
    steady, duration = number(cell, "steady.output_tok_s"), number(cell, "duration_s")
    steady_s = number(cell, "steady.duration_s")
    if steady and duration and steady_s and steady_s >= STEADY_SHARE * duration:
        return steady
    return number(cell, "output_tok_s")


class Objective(StrEnum):
    OUTPUT_TOK_S = "output_tok_s"
    REQUEST_TOK_S = "request_tok_s"
    TTFT_P50_S = "ttft_p50_s"
    GOOD_TOK_S = "good_tok_s"
    J_PER_TOKEN = "j_per_token"


@dataclass(frozen=True)
class ObjectiveSpec:
    """One objective: the catalog's figure it reads (`figure`, its key: the figure's path and direction), and its
    interval: the cell's own (`noise.intervals[interval]`), or, for a figure without one, the relative interval
    of `proxy` (good tok/s and J/token move with the tokens delivered, whose noise is output tok/s's)."""

    objective: Objective
    title: str
    figure: str
    unit: str
    interval: str | None = None
    proxy: str | None = None
    proxy_inverse: bool = False  # the figure falls as the proxy rises (J/token against tokens delivered)
    drift: str = "output_tok_s"  # the drift control's figure whose change between runs stands for this one's
    read: Callable[[CellResult], float | None] | None = field(default=None, compare=False)  # else `path`'s figure

    @property
    def path(self) -> str:
        return str(FIGURES[self.figure].path)

    @property
    def better(self) -> Better:
        return FIGURES[self.figure].better

    @property
    def higher_is_better(self) -> bool:
        return self.better is Better.HIGH

    def value(self, cell: CellResult) -> float | None:
        return self.read(cell) if self.read is not None else number(cell, self.path)

    def interval_of(self, cell: CellResult) -> tuple[float, float] | None:
        """The 95 % interval of the cell's figure: its own, else the proxy's scaled to this figure's value."""
        intervals = cell.noise.intervals or {}
        own = intervals.get(self.interval) if self.interval else None
        if own is not None:
            return float(own[0]), float(own[1])
        proxy = intervals.get(self.proxy) if self.proxy else None
        value, centre = self.value(cell), number(cell, self.proxy) if self.proxy else None
        if proxy is None or value is None or not centre:
            return None
        if self.proxy_inverse:
            return value * centre / proxy[1], value * centre / proxy[0]
        return value * proxy[0] / centre, value * proxy[1] / centre


SPECS = {s.objective: s for s in (
    ObjectiveSpec(Objective.OUTPUT_TOK_S, "output tok/s", "out_tok_s", "tok/s", proxy="output_tok_s",
                  read=sustained_output_tok_s),
    ObjectiveSpec(Objective.REQUEST_TOK_S, "per-request tok/s", "req_tok_s", "tok/s", "request_tok_s.mean"),
    ObjectiveSpec(Objective.TTFT_P50_S, "TTFT p50", "ttft_p50_s", "s", "ttft_s.p50", drift="ttft_p50_s"),
    ObjectiveSpec(Objective.GOOD_TOK_S, "goodput", "good_tok_s", "tok/s", proxy="output_tok_s"),
    ObjectiveSpec(Objective.J_PER_TOKEN, "J/token", "j_per_token", "J/token", proxy="output_tok_s",
                  proxy_inverse=True),
)}
