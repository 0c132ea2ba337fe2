"""The finished-cell gauges: one gauge per figure of the catalog that names one (`metrics/catalog.py`, `live`), set
from the cell's final summary.

Each gauge is labelled by the cell (run, concurrency, context_tokens, request_rate) and keeps its value until
the exporter stops, so a dashboard reads a finished cell with `last_over_time(…[$__range])` long after the
run, and the value is the results JSON's (the same typed cell, not a second formula).
"""

from __future__ import annotations

import math

from loadgen.metrics.catalog import CATALOG
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_view import figure

# figure key -> (summary path, metric name, help): every figure of the catalog with a live gauge, in its order (the
# terminal matrix's, loadgen/report/table.py)
CELL_RESULTS: dict[str, tuple[str, str, str]] = {
    f.key: (str(f.path), f.live, f"Finished cell: {f.meaning}") for f in CATALOG if f.live}


def summary_value(cell: CellResult, path: str) -> float | None:
    """The cell's figure at path "a.b" (`cell_view.figure`) as a finite float; None when any step is missing,
    None or NaN. Booleans count as 0/1 (`client.saturated`)."""
    node = figure(cell, path)
    if isinstance(node, bool):
        return float(node)
    if not isinstance(node, (int, float)) or not math.isfinite(node):
        return None
    return float(node)


def per_gpu_limit_w(cell: CellResult) -> tuple[float, str] | None:
    """(power limit per GPU in W, the telemetry source that read it) of a finished cell, or None."""
    power = cell.telemetry.power
    total = summary_value(cell, "power.limit_w_total")
    gpus = summary_value(cell, "power.gpus")
    if not power or total is None or not gpus or total <= 0:
        return None
    return total / gpus, str(power.get("source") or "telemetry")
