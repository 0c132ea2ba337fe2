"""The matrix's GPU columns: one short column for the default table (`GPU%`: busy % and the bottleneck's short
name: host, pwr, temp, mem, comp, clnt, ?) and the wide ones (the figures behind it). Values from the cell's
`gpu_activity` and `bottleneck` (the typed cell's `gpu` part)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loadgen.metrics.bottleneck import utilization_percent
from loadgen.names import Bottleneck
from loadgen.report import text_table as tt
from loadgen.report.text_table import Column
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_view import check_path, figure
from loadgen.results.figures import GpuTotal
from loadgen.results.gpu_part import Gpu

SHORT: dict[str, str] = {Bottleneck.CLIENT: "clnt", Bottleneck.SERVER_HOST: "host", Bottleneck.GPU_POWER_CAP: "pwr",
         Bottleneck.GPU_THERMAL: "temp", Bottleneck.GPU_MEMORY_BANDWIDTH: "mem", Bottleneck.GPU_COMPUTE: "comp",
         Bottleneck.UNKNOWN: "?"}
MEANING = {"clnt": "the client", "host": "the server's host side", "pwr": "the GPU power cap", "temp": "heat",
           "mem": "memory bandwidth", "comp": "GPU compute", "?": "not told apart"}


def _gpu(cell: CellResult) -> Gpu:
    return cell.gpu


def _total(gpu: Gpu) -> GpuTotal:
    return (gpu.gpu_activity or {}).get("total") or {}


def busy_and_bottleneck(cell: CellResult) -> str:
    """"17 host": the GPUs' utilization (%) and the bottleneck's short name (SHORT); "-" without GPU figures."""
    gpu = _gpu(cell)
    util = utilization_percent(_total(gpu))
    verdict = SHORT.get(gpu.bottleneck or "", "")
    if util is None:
        return verdict if gpu.bottleneck == Bottleneck.CLIENT else tt.MISSING
    return f"{util:.0f} {verdict}".strip()


def legend(cells: Sequence[CellResult]) -> str | None:
    """The legend of `GPU%`'s short names, those the rows show: 'GPU%: busy % of the GPUs and what limited the
    cell (host = the server's host side, ? = not told apart; docs/bottleneck.md)'."""
    shown = {SHORT[b] for c in cells if (b := _gpu(c).bottleneck) in SHORT}
    if not shown:
        return None
    said = ", ".join(f"{name} = {MEANING[name]}" for name in MEANING if name in shown)
    return f"GPU%: busy % of the GPUs and what limited the cell ({said}; docs/bottleneck.md)"


def _share(name: str) -> Callable[[CellResult], str]:
    path = f"gpu_activity.total.{name}"
    check_path(path)  # a misspelt name fails when the columns are made, not as a column of "-"

    def show(cell: CellResult) -> str:
        value = figure(cell, path)
        return tt.MISSING if value is None else f"{100 * value:.0f}%"
    return show


DEFAULT_COLUMN = Column("GPU%", 8, busy_and_bottleneck)  # "100 comp" is the widest
WIDE_COLUMNS = [
    Column("SM clk", 6, _share("sm_clock_fraction")),
    Column("DRAM", 5, _share("dram_active")),
    Column("tensor", 6, _share("tensor_active")),
    Column("pwr cap", 7, _share("power_cap_fraction")),
    Column("bottleneck", -20, lambda c: _gpu(c).bottleneck or tt.MISSING),
]
