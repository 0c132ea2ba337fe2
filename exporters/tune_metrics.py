"""The live exporter's tune metrics (`loadgen tune`; docs/metrics.md): which configuration the tune measures,
each wanted load's leader and the state of its answer, and what the tune has spent. Fed by the visit's plan
(`VisitPlan`, through the run's `Shape.tune_watch`) with `tune.live.TuneState` values made from `tune.json`'s
document, so the gauges and the file agree."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from loadgen.tune.live import TuneState

LOAD_LABELS = ("tune", "ctx", "over", "load")


class TuneGauges:
    """The `loadgen_tune_*` families in the exporter's registry (empty unless a tune runs)."""

    def __init__(self, registry: CollectorRegistry):
        self._shown: dict[str, set[tuple[str, ...]]] = {}

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        self.visit = gauge("loadgen_tune_visit", "1 for the configuration the tune measures now, with the visit's "
                           "phase (first, end 1, …).", ("tune", "config", "phase"))
        self.leader = gauge("loadgen_tune_leader", "1 for each wanted load's leader now (the verdict's first over "
                            "the feasible configurations measured so far).", (*LOAD_LABELS, "config"))
        self.leader_value = gauge("loadgen_tune_leader_value", "The leader's objective figure at the load (its "
                                  "estimate over every part so far).", LOAD_LABELS)
        self.answer = gauge("loadgen_tune_answer", "1 for the state of the load's answer: open (a tie the end will "
                            "measure again), wins, tied, alone or none.", (*LOAD_LABELS, "state"))
        self.cells = gauge("loadgen_tune_cells_measured", "Cells (parts) the tune has measured, failed ones too.",
                           ("tune",))
        self.requests = gauge("loadgen_tune_requests_measured", "Measured requests of every part so far.", ("tune",))
        self.restarts = gauge("loadgen_tune_restarts", "Visits that ran the reconfigure command so far.", ("tune",))
        self.infeasible = gauge("loadgen_tune_infeasible", "1 for each configuration found infeasible (it did not "
                                "come up or failed under load).", ("tune", "config"))

    def _only(self, gauge: Gauge, labels: set[tuple[str, ...]], value: float = 1) -> None:
        """Set `gauge` for exactly `labels`: series no longer true are removed, not left at a stale value."""
        shown = self._shown.setdefault(gauge._name, set())
        for gone in shown - labels:
            gauge.remove(*gone)
        for lab in labels:
            gauge.labels(*lab).set(value)
        self._shown[gauge._name] = set(labels)

    def tune_state(self, s: TuneState) -> None:
        self._only(self.visit, {(s.name, s.config, s.phase or "")} if s.config else set())
        leaders: set[tuple[str, ...]] = set()
        states: set[tuple[str, ...]] = set()
        for ld in s.loads:
            where = (s.name, str(ld.context), ld.over, f"{ld.load:g}")
            if ld.leader is not None:
                leaders.add((*where, ld.leader))
            states.add((*where, ld.answer))
        self._only(self.leader, leaders)
        self._only(self.answer, states)
        values = {(s.name, str(ld.context), ld.over, f"{ld.load:g}"): ld.value for ld in s.loads}
        for lab, value in values.items():
            if value is not None:
                self.leader_value.labels(*lab).set(value)
        self._only(self.infeasible, {(s.name, n) for n in s.infeasible})
        self.cells.labels(s.name).set(s.cells)
        self.requests.labels(s.name).set(s.requests)
        self.restarts.labels(s.name).set(s.restarts)
