"""A cell measured once more, outside the matrix: the drift check's control (`run/drift_check.py`), and any
plan that wants a cell measured again with the run's own settings (a search's control every few probes).

The again-measurement is a whole measurement of the cell (`Runner.measure_repeats`: the same driver,
transport, sinks, telemetry, server-down policy, checks, request count and repeats) with one difference: its
run id is `<run id>-<tag>`. That id is in its records' `run_id` and in the prompts' unique prefixes, so
- the server's prefix cache is as cold for it as it was for the first measurement (same prompt text after
  another prefix: no cached tokens the first measurement did not have either);
- its records in the JSONL belong to no cell of the results (`stored.prune_records` drops them on resume:
  they match no kept cell's run id), and it is never added to the results' cells: the caller stores it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp

from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.run.cell import CellMeasurer

if TYPE_CHECKING:
    from loadgen.run.runner import Runner

CONTROL = "control"  # the drift check's tag


def again_run_id(run_id: str, tag: str = CONTROL) -> str:
    """The run id of a cell measured again under `tag`: `<run id>-<tag>`."""
    return f"{run_id}-{tag}"


async def measure_again(runner: Runner, session: aiohttp.ClientSession, measurer: CellMeasurer, cell: CellKey,
                        tag: str = CONTROL) -> CellResult:
    """`cell` measured once more with the run's settings, its records and prompts under `again_run_id(run id,
    tag)`; returned, not added to `runner.results` (module docstring), and told finished to the sinks as a
    matrix cell is (the live exporter ends its series, under that run id). Progress says `<tag> ctx=… c=…`."""
    run_id = again_run_id(runner.run_id, tag)
    again = await runner.measure_repeats(session, measurer.under(run_id), cell, f"{tag} {cell.label()}")
    for s in runner.parts.sinks:
        s.cell_finished(cell, again)
    return again
