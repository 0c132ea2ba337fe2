"""The drift check of a plain run and of each sweep configuration (docs/drift.md).

The control is the first cell this run measured: after the last cell it is measured again with the same
settings (by the `MeasureAgain` the check is handed, the runner's `remeasure.measure_again`: same load, request
count and repeats, fresh prompt prefixes) and the two measurements are judged beyond noise
(`metrics.drift.judge_drift`). A drift is said on the console, stored in the results' `drift` part and fails the
control cell's check (incident `drifted`: its figures stand, its note says the sentence below the table, in
compare and the report; the run exits 1, a sweep's configuration is not ok, and a resumed run measures the
control, and so checks drift, again).

Cost: one more measurement of the first cell. `--drift-check auto` (the default) pays it only when that cell is
short: at most SHORT_REQUESTS measured requests over all its repeats (SHORT_S seconds with
--duration-per-cell), the run measured more than one cell (a drift misleads where cells measured at different
times are compared) and is not one shard of several (each shard holds part of every cell; the merged run is
what drifts). `on` measures it again whatever it costs, `off` never.
"""

from __future__ import annotations

import textwrap
from collections.abc import Awaitable, Callable

from loadgen.config import CellSize
from loadgen.console import WIDTH, log
from loadgen.metrics.drift import Drift, cell_words, judge_drift
from loadgen.names import DriftCheck
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.incidents import IncidentKind
from loadgen.run.control import RunControl
from loadgen.run.remeasure import CONTROL

SHORT_REQUESTS = 256  # auto: a control of at most this many measured requests (all repeats) is measured again
SHORT_S = 60.0  # auto, --duration-per-cell: at most this many seconds (all repeats)
# a control measured again that failed for these says nothing of the server's speed (timeouts do: judged)
NOT_JUDGED = (IncidentKind.SERVER_DOWN, IncidentKind.WORKER_DIED, IncidentKind.BEFORE_LOAD,
              IncidentKind.CONFIGURATION_CHANGED)
# a cell measured once more with the run's settings under a tag, told to the sinks, not added to the results
MeasureAgain = Callable[[CellKey, str], Awaitable[CellResult]]


class ControlCheck:
    """The run's first cell measured again at the end and judged (module docstring)."""

    def __init__(self, mode: DriftCheck, size: CellSize, sharded: bool = False):
        self.mode = mode  # --drift-check
        self.size = size  # the first cell's load, all its repeats: what measuring it again costs
        self.sharded = sharded  # one shard of several (--shard)

    def quiet_off(self, measured_cells: int) -> bool:
        """auto, and nothing worth saying: one cell measured (nothing later to compare it with), or a shard."""
        return self.mode is DriftCheck.AUTO and (measured_cells < 2 or self.sharded)

    def skipped(self, first: CellResult, planned_requests: int) -> str | None:
        """Why the control is not measured again (None: it is)."""
        size, mode = self.size, self.mode
        if mode is DriftCheck.OFF:
            return "off (--drift-check off)"
        if not first.throughput.output_tok_s:
            return f"skipped: the first cell {cell_words(first)} produced no token to compare"
        if mode is DriftCheck.ON:
            return None
        if size.duration_per_cell_s:
            if size.duration_per_cell_s * size.repeat > SHORT_S:
                return f"off: the first cell is long (> {SHORT_S:g} s; --drift-check on measures it again)"
        elif planned_requests * size.repeat > SHORT_REQUESTS:
            return (f"off: the first cell is long ({planned_requests * size.repeat} requests > {SHORT_REQUESTS}; "
                    "--drift-check on measures it again)")
        return None

    async def run(self, first: CellResult, measured_cells: int, planned_requests: int, measure_again: MeasureAgain,
                  control: RunControl) -> Drift | None:
        """The verdict on `first` measured again by `measure_again` (None when the check is off or skipped: said
        why). `measured_cells`: the cells this run measured; `planned_requests`: the first cell's."""
        if self.quiet_off(measured_cells):
            return None
        reason = self.skipped(first, planned_requests)
        if reason is not None:
            if self.mode is not DriftCheck.OFF:
                log(f"drift check {reason}")
            return None
        log(f"drift check: measuring the first cell again ({cell_words(first)}), the control")
        again = await measure_again(first.key, CONTROL)
        if control.stopping:
            log(f"drift check: not judged ({control.stop_reason})")
            return None
        if any(again.has(kind) for kind in NOT_JUDGED):
            log(textwrap.fill(f"drift check: not judged: measuring the control again failed ({again.error})",
                              WIDTH, subsequent_indent="    "))
            return None
        drift = judge_drift(first, again)
        if drift.drifted:  # the runner attaches it to the first cell (`Runner.check_drift`)
            log(f"DRIFT: {drift.sentence}")
        else:
            log(f"drift check: {drift.sentence}")
        return drift
