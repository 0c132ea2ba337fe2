"""Configurations ranked by goodput, when their cells were measured with latency targets (`--slo`).

A configuration's goodput is its peak: the highest good output tok/s (`slo.good_output_tok_s`) over its
measured cells that met the SLO and failed no check that fails a cell (garbage output, output mismatch), with
the cell it was reached at. Output tok/s that misses the targets earns nothing here: a request that missed a
target adds no token, and a cell that missed the SLO is not counted. A configuration without a peak says why:
no cell was measured, no cell met the SLO, or its cells that met it failed another check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import CheckKind, failed_checks, measured
from loadgen.results.cell_view import results_of

# a check that takes a cell that met the SLO out of the ranking → how the ranking says it
DISQUALIFY = {CheckKind.GARBAGE: "produced garbage", CheckKind.MISMATCH: "their outputs differed from the reference"}


class Configuration(Protocol):
    name: str
    cells: dict[Any, Any]


def _met(cell: CellResult) -> bool:
    return bool(measured(cell) and cell.slo and cell.slo.met and cell.slo.good_output_tok_s)


def _disqualified(cell: CellResult) -> list[CheckKind]:
    return [f.kind for f in failed_checks(cell) if f.kind in DISQUALIFY]


def _good_tok_s(cell: CellResult) -> float | None:
    """The cell's good output tok/s where it counts for the ranking (it met the SLO, no check of `DISQUALIFY`
    failed it); None where not."""
    if cell.slo is None or not _met(cell) or _disqualified(cell):
        return None
    return cell.slo.good_output_tok_s


def peak_goodput(cells: Mapping[Any, CellResult]) -> tuple[float, CellResult] | None:
    """(highest good output tok/s, its cell) over the measured cells that met their SLO and failed no check
    of `DISQUALIFY`; None without any."""
    found = [(tok_s, c) for c in cells.values() if (tok_s := _good_tok_s(c))]
    return max(found, key=lambda f: f[0]) if found else None


def no_peak(cells: Mapping[Any, CellResult]) -> str:
    """Why a configuration has no goodput: 'no cell was measured (4 failed or skipped)', 'measured without
    latency targets (--slo)', 'no cell met the SLO', or '3 cells met the SLO but produced garbage'."""
    shown = [c for c in cells.values() if measured(c)]
    if not shown:
        return f"no cell was measured ({len(cells)} failed or skipped)"
    if not any(c.slo for c in shown):
        return "measured without latency targets (--slo)"
    met = [c for c in shown if _met(c)]
    if not met:
        return "no cell met the SLO"
    kinds = list(dict.fromkeys(k for c in met for k in _disqualified(c)))
    cells_word = "1 cell" if len(met) == 1 else f"{len(met)} cells"
    return f"{cells_word} met the SLO but {' or '.join(DISQUALIFY[k] for k in kinds)}"


def _load(cell: CellResult) -> str:
    key = cell.key
    return f"ctx={key.context_tokens} " + (f"rate={key.request_rate:g}/s" if key.request_rate is not None
                                           else f"c={key.concurrency}")


def goodput_ranking(runs: Sequence[Configuration]) -> str | None:
    """'configurations by goodput …' then one line each, best first, then those without a peak and why; None
    when no cell has SLO figures."""
    typed = [(r, results_of(r)) for r in runs]
    if not any(c.slo for _, cells in typed for c in cells.values()):
        return None
    peaks = [(r, cells, peak_goodput(cells)) for r, cells in typed]
    ranked = sorted(((r.name, p) for r, _, p in peaks if p is not None), key=lambda x: -x[1][0])
    lines = ["configurations by goodput (peak good output tok/s over measured cells that met the SLO, "
             "garbage left out):"]
    for i, (name, (tok_s, cell)) in enumerate(ranked, 1):
        assert cell.slo is not None  # a peak's cell met its SLO (`_met`)
        lines.append(f"  {i}. {name:<24} {tok_s:10.1f} good tok/s at {_load(cell)} ({cell.slo.attainment:.0%} good)")
    lines += [f"  -  {r.name:<24} {no_peak(cells)}" for r, cells, p in peaks if p is None]
    return "\n".join(lines)
