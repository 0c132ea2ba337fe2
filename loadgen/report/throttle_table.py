"""The request-rate ceiling's table (pure: typed cells in, text out): per closed-loop cell under
`--max-request-rate`, the ceiling, the achieved rate, the peak starts in a 1 s window and the time throttled."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.report import text_table as tt
from loadgen.report.text_table import Column, number
from loadgen.results.cell_result import CellResult


def _fraction(cell: CellResult) -> str:
    f = tt.field(cell, "throttle.throttled_fraction")
    return tt.MISSING if f is None else f"{f * 100:.0f}%"


COLUMNS = [
    tt.CONTEXT,
    Column("conc", 5, lambda c: str(c.key.concurrency)),
    Column("max req/s", 10, number("throttle.max_request_rate", "g")),
    Column("achieved", 9, number("throttle.achieved_request_rate", ".2f")),
    Column("peak/1s", 8, number("throttle.peak_starts_per_s", "d")),
    Column("throttled s", 12, number("throttle.throttled_s", ".2f")),
    Column("of slots", 0, _fraction),
]


def throttle_table(cells: Sequence[CellResult]) -> str | None:
    rows = [c for c in cells if c.load.throttle]
    if not rows:
        return None
    return "\n".join(["request-rate ceiling:", tt.header(COLUMNS), *(tt.line(COLUMNS, c) for c in rows)])
