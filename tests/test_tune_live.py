"""The tune's live state (`tune.live`) and its gauges (`exporters.tune_metrics`): made from tune.json's document,
so the exporter says what the file says; a leader, a visit or an infeasible configuration that is no longer so
leaves no series behind."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from exporters.tune_metrics import TuneGauges
from loadgen.tune.live import tune_state

pytestmark = pytest.mark.unit


def answer(concurrency: int, decision: str, estimates: list[tuple[str, float]], contenders=()) -> dict:
    return {"context": 60, "concurrency": concurrency, "rate": None, "decision": decision,
            "estimates": [{"config": c, "value": v} for c, v in estimates], "contenders": list(contenders)}


def doc(answers: list[dict], infeasible=(), cells=5, requests=80, restarts=3) -> dict:
    return {"name": "sim", "answers": answers, "infeasible": [{"name": n} for n in infeasible],
            "cells_measured": cells, "requests_measured": requests, "restarts": restarts,
            "configs": [{"name": n} for n in ("b8", "b16", "b64")]}


def ones(reg: CollectorRegistry, name: str) -> dict[tuple, float]:
    """The series of a state set that are 1."""
    return {k: v for k, v in samples(reg, name).items() if v == 1}


def samples(reg: CollectorRegistry, name: str) -> dict[tuple, float]:
    return {tuple(sorted(s.labels.items())): s.value for m in reg.collect() for s in m.samples if s.name == name}


def test_the_state_reads_each_loads_leader_and_whether_its_answer_is_open():
    s = tune_state(doc([answer(1, "wins", [("b8", 120.0), ("b16", 100.0)]),
                        answer(4, "tied", [("b16", 300.0), ("b8", 299.0)], contenders=["b16", "b8"]),
                        {"context": 60, "concurrency": None, "rate": 2.5, "decision": "none", "estimates": [],
                         "contenders": []}]), "b8", "first")
    assert [(ld.over, ld.load, ld.leader, ld.value, ld.answer) for ld in s.loads] == [
        ("concurrency", 1.0, "b8", 120.0, "wins"), ("concurrency", 4.0, "b16", 300.0, "open"),
        ("rate", 2.5, None, None, "none")]
    assert (s.config, s.phase, s.cells, s.requests, s.restarts) == ("b8", "first", 5, 80, 3)


def test_the_gauges_follow_the_state_and_zero_what_is_no_longer_true():
    reg = CollectorRegistry()
    g = TuneGauges(reg)
    g.tune_state(tune_state(doc([answer(1, "wins", [("b8", 120.0)])], infeasible=["b64"]), "b8", "first"))
    where = (("ctx", "60"), ("load", "1"), ("over", "concurrency"), ("tune", "sim"))
    assert ones(reg, "loadgen_tune_leader") == {tuple(sorted((*where, ("config", "b8")))): 1.0}
    assert len(samples(reg, "loadgen_tune_leader")) == 3  # every configuration of the file, 0 but the leader
    assert samples(reg, "loadgen_tune_leader_value") == {where: 120.0}
    assert ones(reg, "loadgen_tune_answer") == {tuple(sorted((*where, ("state", "wins")))): 1.0}
    assert len(samples(reg, "loadgen_tune_answer")) == 5
    assert samples(reg, "loadgen_tune_visit") == {(("config", "b8"), ("phase", "first"), ("tune", "sim")): 1.0}
    assert ones(reg, "loadgen_tune_infeasible") == {(("config", "b64"), ("tune", "sim")): 1.0}
    assert samples(reg, "loadgen_tune_requests_measured") == {(("tune", "sim"),): 80.0}

    g.tune_state(tune_state(doc([answer(1, "tied", [("b16", 125.0), ("b8", 121.0)], ["b16", "b8"])], cells=7,
                                requests=112, restarts=5), "b16", "end 1"))
    assert ones(reg, "loadgen_tune_leader") == {tuple(sorted((*where, ("config", "b16")))): 1.0}
    assert samples(reg, "loadgen_tune_leader")[tuple(sorted((*where, ("config", "b8"))))] == 0
    assert samples(reg, "loadgen_tune_leader_value") == {where: 125.0}
    assert ones(reg, "loadgen_tune_answer") == {tuple(sorted((*where, ("state", "open")))): 1.0}
    assert samples(reg, "loadgen_tune_visit") == {(("config", "b16"), ("phase", "end 1"), ("tune", "sim")): 1.0}
    assert ones(reg, "loadgen_tune_infeasible") == {}
    assert samples(reg, "loadgen_tune_cells_measured") == {(("tune", "sim"),): 7.0}
    assert samples(reg, "loadgen_tune_restarts") == {(("tune", "sim"),): 5.0}
