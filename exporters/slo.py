"""The live exporter's SLO metrics (`--slo`; docs/metrics.md): whether each measured request was good, the
running cell's attainment so far, the attainment it must reach, and each finished cell's attainment and goodput.

Every figure comes from `loadgen.metrics.slo`: a request's goodness and the running attainment from
`SloTally` (good / ended so far), a finished cell's from its summary's `slo` part (good / scheduled, the
requests never sent included), so the gauge ends on the results file's value.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from exporters.cell_results import summary_value
from loadgen.config import SloConfig
from loadgen.metrics.slo import SloTally
from loadgen.names import Phase
from loadgen.record import Record
from loadgen.results.cell_result import CellResult

CellLabels = tuple[str, str, str, str]
FINISHED = {  # summary path → (metric, help): set once the cell's summary is final
    "slo.goodput_requests_s": ("loadgen_slo_goodput_requests_per_second",
                               "Finished cell: requests that met every target per second of the cell's window."),
    "slo.good_output_tok_s": ("loadgen_slo_good_output_tokens_per_second",
                              "Finished cell: output tokens of requests that met every target per second."),
    "slo.met": ("loadgen_slo_met", "Finished cell: 1 when its attainment reached --slo-attainment, else 0."),
}


class SloMetrics:
    """The SLO families in the exporter's registry; fed by the exporter's sink hooks (only with targets)."""

    def __init__(self, registry: CollectorRegistry, slo: SloConfig, cell_labels: tuple[str, ...]):
        self.slo = slo
        self.requests = Counter("loadgen_slo_requests_total", "Measured requests that ended, by whether they "
                                "were good (succeeded and met every --slo target).", cell_labels + ("good",),
                                registry=registry)
        self.attainment = Gauge("loadgen_slo_attainment", "The cell's SLO attainment: while it runs good / "
                                "ended so far, once it ended good / scheduled (the results' slo.attainment).",
                                cell_labels, registry=registry)
        self.required = Gauge("loadgen_slo_attainment_target", "The attainment a cell must reach "
                              "(--slo-attainment).", ("run",), registry=registry)
        self.finished = {path: Gauge(name, doc, cell_labels, registry=registry)
                         for path, (name, doc) in FINISHED.items()}
        self._tally: tuple[CellLabels, SloTally] | None = None
        self._run: str | None = None

    def cell_started(self, key: CellLabels) -> None:
        if not self.slo.enabled:  # no targets: the families stay empty
            return
        run = key[0]
        if run != self._run:
            if self._run is not None:
                self.required.remove(self._run)
            self._run = run
            self.required.labels(run).set(self.slo.slo_attainment)
        self._tally = (key, SloTally(self.slo.slo_targets))
        for good in ("true", "false"):
            self.requests.labels(*key, good)

    def record(self, key: CellLabels, rec: Record) -> None:
        if rec.phase != Phase.MEASURE or self._tally is None or self._tally[0] != key:
            return
        tally = self._tally[1]
        good = tally.add(rec)
        self.requests.labels(*key, "true" if good else "false").inc()
        if tally.attainment is not None:  # None while every ended request was abandoned by design
            self.attainment.labels(*key).set(tally.attainment)

    def cell_finished(self, key: CellLabels, result: CellResult) -> None:
        final = summary_value(result, "slo.attainment")
        if final is not None:
            self.attainment.labels(*key).set(final)
        for path, gauge in self.finished.items():
            value = summary_value(result, path)
            if value is not None:
                gauge.labels(*key).set(value)
        self._tally = None
