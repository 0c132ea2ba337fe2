"""One cell measured N times (`--repeat N`) → one cell's result (pure).

Each repeat is a whole measurement of the cell (its own warmup, load and window). The combined cell keeps
the last repeat's figures, with the key figures (`catalog.KEY_FIGURES`) replaced by their mean over the
repeats and their intervals by Student's t interval across the repeats; each repeat's value and window are in
`repeats`. Requests are counted over every repeat, and every repeat's incidents are the cell's: one failed or
saturated repeat makes the cell so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from loadgen.metrics.catalog import KEY_FIGURES
from loadgen.metrics.cell_noise import REPEATS, repeats_figures
from loadgen.metrics.confidence import LEVEL
from loadgen.record import OUTCOMES
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.cell_status import requests_failed_fraction
from loadgen.results.cell_view import declared, figure
from loadgen.results.figures import RequestCounts


def _set(cell: dict, path: str, value: float) -> None:
    """cell["a"]["b"] = value for path "a.b", copying the inner dicts on the way (nothing shared is changed)."""
    *parents, name = path.split(".")
    node = cell
    for key in parents:
        if not isinstance(node.get(key), dict):
            return
        node[key] = node = dict(node[key])
    node[name] = value


def _requests(results: Sequence[CellResult]) -> RequestCounts:
    """The repeats' request counts summed, outcome by outcome."""
    each = [r.requests.requests for r in results]
    by = {o: sum(req.get("by_outcome", {}).get(o, 0) for req in each) for o in OUTCOMES}
    counts = RequestCounts(ok=sum(req.get("ok") or 0 for req in each),
                           failed=sum(req.get("failed") or 0 for req in each),
                           cancelled=sum(req.get("cancelled") or 0 for req in each))
    abandoned = sum(req.get("abandoned") or 0 for req in each)
    if abandoned:  # only when some were
        counts["abandoned"] = abandoned
    counts["by_outcome"] = {o: n for o, n in by.items() if n}
    return counts


def _samples(results: Sequence[CellResult]) -> dict:
    """{key figure: [each repeat's samples]} for the key figures of a distribution ("ttft_s.p50": ttft_s's
    samples): what a mean over the repeats was computed from (the table's `*`)."""
    counted = {path: path.split(".")[0] + ".samples" for path in KEY_FIGURES}
    each = {path: [figure(r, n) for r in results] for path, n in counted.items() if declared(n)}
    return {path: n for path, n in each.items() if all(isinstance(x, int) for x in n)}


def combine_repeats(results: Sequence[CellResult]) -> CellResult:
    """The cell of N repeats (N ≥ 1; one repeat is returned as it is)."""
    if len(results) == 1:
        return results[0]
    cells = [r.to_json() for r in results]
    values = {path: [figure(r, path) for r in results] for path in KEY_FIGURES}
    means, intervals = repeats_figures(values)
    out = dict(cells[-1])
    for path, mean in means.items():
        _set(out, path, mean)
    out["requests"] = _requests(results)
    out["failed_fraction"] = requests_failed_fraction(out["requests"])
    out["intervals"] = intervals
    out["interval_method"] = {"method": REPEATS, "level": LEVEL, "samples": len(cells)}
    out["repeats"] = {"n": len(cells), "values": values, "samples": _samples(results),
                      "windows": [r.load.wall_clock or r.load.window_ns for r in results]}
    out["incidents"] = []
    combined = from_json(out)
    return replace(combined, incidents=list(dict.fromkeys([*combined.incidents, *(i for r in results
                                                                                  for i in r.incidents)])),
                   warnings=list(dict.fromkeys(w for r in results for w in r.warnings)))
