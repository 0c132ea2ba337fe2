"""Configurations ranked by goodput, when their cells were measured with latency targets (`--slo`).

A configuration's goodput is its peak: the highest good output tok/s (`slo.good_output_tok_s`) over its
usable cells that met the SLO, with the cell it was reached at. Output tok/s that misses the targets earns
nothing here: a request that missed a target adds no token, and a cell that missed the SLO is not counted.
"""

from __future__ import annotations

from typing import Protocol

from loadgen.results.cell_status import problem


class Configuration(Protocol):
    name: str
    cells: dict


def peak_goodput(cells: dict) -> tuple[float, dict] | None:
    """(highest good output tok/s, its cell) over the usable cells that met their SLO; None without any."""
    found = [(c["slo"]["good_output_tok_s"], c) for c in cells.values()
             if problem(c) is None and (c.get("slo") or {}).get("met") and c["slo"].get("good_output_tok_s")]
    return max(found, key=lambda f: f[0]) if found else None


def _load(cell: dict) -> str:
    rate = cell.get("request_rate")
    return f"ctx={cell['context_tokens']} " + (f"rate={rate:g}/s" if rate is not None else f"c={cell['concurrency']}")


def goodput_ranking(runs: list[Configuration]) -> str | None:
    """'configurations by goodput …' then one line each, best first; None when no cell has SLO figures."""
    if not any(c.get("slo") for r in runs for c in r.cells.values()):
        return None
    peaks = [(r.name, peak_goodput(r.cells)) for r in runs]
    ranked = sorted(((name, p) for name, p in peaks if p is not None), key=lambda x: -x[1][0])
    lines = ["configurations by goodput (peak good output tok/s over cells that met the SLO):"]
    for i, (name, (tok_s, cell)) in enumerate(ranked, 1):
        slo = cell["slo"]
        lines.append(f"  {i}. {name:<24} {tok_s:10.1f} good tok/s at {_load(cell)} ({slo['attainment']:.0%} good)")
    lines += [f"  -  {name:<24} no cell met the SLO" for name, p in peaks if p is None]
    return "\n".join(lines)
