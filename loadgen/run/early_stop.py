"""Stopping a search's probe early when the server is plainly over-saturated and the probe can no longer
meet the SLO (`loadgen search`): a sink that watches the cell's measured records as they end.

It stops the attempt's load through the token it was armed with (requests in flight finish; the rest are
never sent and count as not good), and says why; the server-down policy records that as an
`oversaturated` incident, which notes the cell and keeps it on resume. Both conditions must hold:
the miss is certain (`SloTally.miss_certain`: even if every request still to come were good, the cell
could not reach the required attainment), and the requests show the over-saturation signature
(`metrics.oversaturation`) against the nearest lower probe, which the search plan names (`compare_with`)
before each probe. Never before the probe's minimum (`min_requests` ended, or all its planned requests when
fewer, and `min_s` seconds since its first send): a probe shorter than that says too little to be cut.
A probe missed for another reason (a stricter target than the server meets at any
load, or a load whose throughput still grows) runs to its end.
"""

from __future__ import annotations

from loadgen.config import SloConfig
from loadgen.metrics.oversaturation import Reference, oversaturated
from loadgen.metrics.slo import SloTally
from loadgen.names import Phase
from loadgen.record import CellKey, Record
from loadgen.schedule.cell_run import StopToken
from loadgen.sinks.base import NullSink

CHECK_EVERY = 4  # records between two looks at the signature (each look sorts the records so far)


class OversaturationStop(NullSink):
    def __init__(self, slo: SloConfig, min_requests: int = 0, min_s: float = 0.0):
        self.slo = slo
        self.min_requests, self.min_s = min_requests, min_s
        self.reason: str | None = None
        self.reference: Reference | None = None
        self.load = 0.0
        self._arm(None, None, 0)

    def compare_with(self, reference: Reference | None, load: float) -> None:
        """The next probe's load and the probe below it (None: there is none yet)."""
        self.reference, self.load = reference, load

    def _arm(self, stop: StopToken | None, cell: CellKey | None, planned: int) -> None:
        self.stop, self.cell, self.planned = stop, cell, planned
        self.tally = SloTally(self.slo.slo_targets)
        self.ended: list[Record] = []
        self.first_sent_ns: int | None = None
        self.reason = None

    def arm(self, stop: StopToken, cell: CellKey, planned: int) -> None:
        """Watch a new attempt at `cell` (`planned` measured requests), whose load stops through `stop`."""
        self._arm(stop, cell, planned)

    def _past_minimum(self, rec: Record) -> bool:
        if rec.t_sent_ns > 0:
            self.first_sent_ns = min(self.first_sent_ns or rec.t_sent_ns, rec.t_sent_ns)
        return (len(self.ended) >= min(self.min_requests, self.planned)
                and (rec.t_end_ns - (self.first_sent_ns or rec.t_end_ns)) / 1e9 >= self.min_s)

    def record(self, rec: Record) -> None:
        if self.stop is None or rec.phase != Phase.MEASURE or rec.cell != self.cell or self.reason is not None:
            return
        self.tally.add(rec)
        self.ended.append(rec)
        if not self._past_minimum(rec) or len(self.ended) % CHECK_EVERY \
                or not self.tally.miss_certain(self.planned, self.slo.slo_attainment):
            return
        evidence = oversaturated(self.ended, self.reference, self.load,
                                 min(2 * self.cell.concurrency, self.planned // 2))
        if evidence:
            self.reason = (f"stopped early: over-saturated ({evidence}) and the SLO can no longer be met "
                           f"({self.tally.ended - self.tally.good} of {self.planned} requests already not good)")
            self.stop.stop(self.reason)
