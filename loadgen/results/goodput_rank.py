"""Configurations ranked by goodput, when their cells were measured with latency targets (`--slo`).

A configuration's goodput is its peak: the highest good output tok/s (`slo.good_output_tok_s`) over its
measured cells that met the SLO and failed no check that fails a cell (garbage output, output mismatch), with
the cell it was reached at. Output tok/s that misses the targets earns nothing here: a request that missed a
target adds no token, and a cell that missed the SLO is not counted. A configuration without a peak says why:
no cell was measured, no cell met the SLO, or its cells that met it failed another check.
"""

from __future__ import annotations

from typing import Protocol

from loadgen.results.cell_status import CheckKind, failed_checks, measured

# a check that takes a cell that met the SLO out of the ranking → how the ranking says it
DISQUALIFY = {CheckKind.GARBAGE: "produced garbage", CheckKind.MISMATCH: "their outputs differed from the reference"}


class Configuration(Protocol):
    name: str
    cells: dict


def _met(cell: dict) -> bool:
    slo = cell.get("slo") or {}
    return bool(measured(cell) and slo.get("met") and slo.get("good_output_tok_s"))


def _disqualified(cell: dict) -> list[CheckKind]:
    return [f.kind for f in failed_checks(cell) if f.kind in DISQUALIFY]


def peak_goodput(cells: dict) -> tuple[float, dict] | None:
    """(highest good output tok/s, its cell) over the measured cells that met their SLO and failed no check
    of `DISQUALIFY`; None without any."""
    found = [(c["slo"]["good_output_tok_s"], c) for c in cells.values() if _met(c) and not _disqualified(c)]
    return max(found, key=lambda f: f[0]) if found else None


def no_peak(cells: dict) -> str:
    """Why a configuration has no goodput: 'no cell was measured (4 failed or skipped)', 'measured without
    latency targets (--slo)', 'no cell met the SLO', or '3 cells met the SLO but produced garbage'."""
    shown = [c for c in cells.values() if measured(c)]
    if not shown:
        return f"no cell was measured ({len(cells)} failed or skipped)"
    if not any(c.get("slo") for c in shown):
        return "measured without latency targets (--slo)"
    met = [c for c in shown if _met(c)]
    if not met:
        return "no cell met the SLO"
    kinds = list(dict.fromkeys(k for c in met for k in _disqualified(c)))
    cells_word = "1 cell" if len(met) == 1 else f"{len(met)} cells"
    return f"{cells_word} met the SLO but {' or '.join(DISQUALIFY[k] for k in kinds)}"


def _load(cell: dict) -> str:
    rate = cell.get("request_rate")
    return f"ctx={cell['context_tokens']} " + (f"rate={rate:g}/s" if rate is not None else f"c={cell['concurrency']}")


def goodput_ranking(runs: list[Configuration]) -> str | None:
    """'configurations by goodput …' then one line each, best first, then those without a peak and why; None
    when no cell has SLO figures."""
    if not any(c.get("slo") for r in runs for c in r.cells.values()):
        return None
    peaks = [(r, peak_goodput(r.cells)) for r in runs]
    ranked = sorted(((r.name, p) for r, p in peaks if p is not None), key=lambda x: -x[1][0])
    lines = ["configurations by goodput (peak good output tok/s over measured cells that met the SLO, "
             "garbage left out):"]
    for i, (name, (tok_s, cell)) in enumerate(ranked, 1):
        slo = cell["slo"]
        lines.append(f"  {i}. {name:<24} {tok_s:10.1f} good tok/s at {_load(cell)} ({slo['attainment']:.0%} good)")
    lines += [f"  -  {r.name:<24} {no_peak(r.cells)}" for r, p in peaks if p is None]
    return "\n".join(lines)
