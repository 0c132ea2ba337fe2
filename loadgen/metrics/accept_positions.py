"""Acceptance by draft position (definitions.md#acceptance-by-draft-position): the figure that tells whether a
larger draft budget can pay. From vLLM's per-position counters over the cell's window
(`telemetry.server_metrics`: Δaccepted at position i, Δdrafts = verify steps), else from SGLang's per-request
`spec_correct_drafts_histogram` (H[j] = the request's verify steps that accepted j drafts), summed over the
cell's ok requests: drafts = Σ_j H[j], accepted_i = Σ_{j > i} H[j] (a step that accepted j drafts accepted
positions 0 … j − 1):

- rate_i = Δaccepted_i / Δdrafts: the share of verify steps whose draft token at position i (from 0) was
  accepted (a draft token counts only when every one before it was accepted, so rate_i never rises with i);
- conditional_i = Δaccepted_i / Δaccepted_{i−1} (rate_0 for i = 0): the chance that position i is accepted
  once position i − 1 was, the marginal value of one more draft position.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.engines.registry import draft_counting
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.source_result import SourceResult
from loadgen.record import Record

DRAFT_BLOCKS = draft_counting()  # the server_metrics values that carry drafts and accepted_per_position


def acceptance_by_position(accepted: Sequence[float | None], drafts: float) -> list[dict] | None:
    """[{position, rate, conditional}] for each position counted; None without drafts."""
    if not drafts or not accepted:
        return None
    out, before = [], None
    for i, a in enumerate(accepted):
        rate = a / drafts if a is not None else None
        cond = rate if i == 0 else (a / before if a is not None and before else None)
        out.append({"position": i, "rate": rate, "conditional": cond})
        before = a
    return out


def from_histograms(ok: Sequence[Record] | RecordTable) -> list[dict] | None:
    """The cell's acceptance by draft position from its ok requests' SGLang histograms (a value that is not a
    number counts 0), or None without them."""
    values, lengths = RecordTable.of(ok).spec_lists("spec_correct_drafts_histogram")
    if not values.size:
        return None
    sizes = np.maximum(lengths, 0)
    starts = np.cumsum(sizes) - sizes  # where each row's list begins in `values`
    # each position's total added up in record order, one addition at a time (cumsum), as a running sum would
    total = [float(np.cumsum(values[starts[sizes > j] + j])[-1]) for j in range(int(sizes.max()))]
    accepted = [sum(total[i + 1:]) for i in range(len(total) - 1)]
    return acceptance_by_position(accepted, sum(total))


def from_sources(sources: Sequence[SourceResult]) -> list[dict] | None:
    """The cell's acceptance by draft position from the server-metrics source, or None where the server
    exports no per-position counters."""
    for src in sources:
        for engine in DRAFT_BLOCKS:
            block = src.values.get(engine) if src.available else None
            if isinstance(block, dict) and block.get("accepted_per_position"):
                return acceptance_by_position(block["accepted_per_position"], block.get("drafts") or 0)
    return None
