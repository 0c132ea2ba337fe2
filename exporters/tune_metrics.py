"""The live exporter's tune metrics (`loadgen tune`; docs/metrics.md): which configuration the tune measures,
each wanted load's leader and the state of its answer, and what the tune has spent. Fed by the visit's plan
(`VisitPlan`, through the run's `Shape.tune_watch`) with `tune.live.TuneState` values made from `tune.json`'s
document, so the gauges and the file agree."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from loadgen.tune.live import ANSWER_STATES, TuneState

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
                            "the feasible configurations measured so far), 0 for every other configuration.",
                            (*LOAD_LABELS, "config"))
        self.leader_value = gauge("loadgen_tune_leader_value", "The leader's objective figure at the load (its "
                                  "estimate over every part so far).", LOAD_LABELS)
        self.answer = gauge("loadgen_tune_answer", "1 for the state of the load's answer, 0 for the others: open (a "
                            "tie the end will measure again), wins, tied, alone, none.", (*LOAD_LABELS, "state"))
        self.cells = gauge("loadgen_tune_cells_measured", "Cells (parts) the tune has measured, failed ones too.",
                           ("tune",))
        self.requests = gauge("loadgen_tune_requests_measured", "Measured requests of every part so far.", ("tune",))
        self.restarts = gauge("loadgen_tune_restarts", "Visits that ran the reconfigure command so far.", ("tune",))
        self.infeasible = gauge("loadgen_tune_infeasible", "1 for each configuration found infeasible (it did not "
                                "come up or failed under load), 0 for the others.", ("tune", "config"))

    def _states(self, gauge: Gauge, where: tuple[str, ...], names: tuple[str, ...], true: set[str]) -> None:
        """A state set: every name 0 but those `true` 1. Each visit's run has an exporter of its own, which knows
        nothing of the last one's series: a leader that was is written 0 here, so that the last value over the
        tune's range (the dashboard's `last_over_time(…) == 1`) names only the leader that is."""
        for name in {*names, *true}:
            gauge.labels(*where, name).set(1 if name in true else 0)

    def tune_state(self, s: TuneState) -> None:
        shown = self._shown.setdefault("visit", set())
        now: set[tuple[str, ...]] = {(s.name, s.config, s.phase or "")} if s.config else set()
        for gone in shown - now:
            self.visit.remove(*gone)
        for lab in now:
            self.visit.labels(*lab).set(1)
        self._shown["visit"] = now
        for ld in s.loads:
            where = (s.name, str(ld.context), ld.over, f"{ld.load:g}")
            self._states(self.leader, where, s.configs, {ld.leader} if ld.leader else set())
            self._states(self.answer, where, ANSWER_STATES, {ld.answer})
            if ld.value is not None:
                self.leader_value.labels(*where).set(ld.value)
        self._states(self.infeasible, (s.name,), s.configs, set(s.infeasible))
        self.cells.labels(s.name).set(s.cells)
        self.requests.labels(s.name).set(s.requests)
        self.restarts.labels(s.name).set(s.restarts)
