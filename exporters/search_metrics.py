"""The live exporter's search metrics (`loadgen search`; docs/metrics.md): where each prompt length's search
stands, labelled {ctx, over}. Fed by the search plan (`SearchPlan.watch`) with `search.state`
values, each made from the walk's bracket over the cells measured so far, so the gauges and the answer the
search prints agree."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from loadgen.search.state import SearchState

LABELS = ("ctx", "over")


class SearchGauges:
    """The `loadgen_search_*` families in the exporter's registry (empty unless a search runs)."""

    def __init__(self, registry: CollectorRegistry):
        self._shown: set[tuple[str, tuple[str, str]]] = set()

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=registry)

        self.probe = gauge("loadgen_search_probe_load", "The load the search is probing now (concurrency, or "
                           "requests/s with over=rate); absent between probes.")
        self.met = gauge("loadgen_search_met_load", "The highest load that met the SLO below the bracket's "
                         "missed end, so far.")
        self.missed = gauge("loadgen_search_missed_load", "The lowest load that missed the SLO, so far.")
        self.answer = gauge("loadgen_search_answer", "The search's answer: the highest load that meets the SLO; "
                            "set once answered (absent when there is none).")
        self.cells = gauge("loadgen_search_probes_measured", "Cells the search has measured for this prompt "
                           "length (extensions, measurements again and control probes included).")
        self.drifted = gauge("loadgen_search_drifted", "1 when the control probe measured again found the "
                             "server drifted (the search gives no answer), else 0.")

    def search_state(self, s: SearchState) -> None:
        labels = (str(s.context), s.over)
        for gauge, value in ((self.probe, s.probe), (self.met, s.met), (self.missed, s.missed),
                             (self.answer, s.answer)):
            shown = (gauge._name, labels)
            if value is not None:
                gauge.labels(*labels).set(value)
                self._shown.add(shown)
            elif shown in self._shown:  # absent, not a stale value, when there is none
                gauge.remove(*labels)
                self._shown.discard(shown)
        self.cells.labels(*labels).set(s.cells)
        self.drifted.labels(*labels).set(int(s.drifted))
