"""The run overview's tune row against a real Prometheus scraping a real `loadgen tune` of the simulator.

Three configurations at c=1 and c=2 (one dying under load), each visit's run serving its live metrics on the same
port, scraped every second. Once the tune has exited, every query of the tune row is evaluated as Grafana would
and must agree with tune.json: each load's leader and the state of its answer, what the tune spent, and the
infeasible configuration.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from tests import side_by_side
from tests.test_prometheus_e2e import DASHBOARDS, PROMETHEUS, Stack, finite_points, free_port, start_logged
from tests.test_search_dashboard import scraping_prometheus
from tests.test_tune import Bench

pytestmark = [pytest.mark.infra, pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian "
                                                                            "package 'prometheus'; CI installs it)")]

TUNE_ROW = "Configuration tune (loadgen tune)"
CONFIGS = [("b8t4", 8, 4, 10_000), ("b64t1", 64, 1, 1), ("b32t8", 32, 8, 10_000)]


def tune_panels() -> dict[str, dict]:
    """{panel title: panel} of the run overview's tune row."""
    panels = next(d for d in DASHBOARDS if d["uid"] == "loadgen-run-overview")["panels"]
    row = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == TUNE_ROW)
    return {p["title"]: p for p in itertools.takewhile(lambda p: p["type"] != "row", panels[row + 1:])}


@side_by_side.background("tune-dashboard", when=PROMETHEUS is not None)
def build_tuned(tmp: Path, cleanups) -> Stack:
    bench = Bench(tmp)
    cleanups.callback(bench.stop)
    metrics_port = free_port()
    path = bench.write(CONFIGS, requests=16)
    text = path.read_text().replace("concurrency = [1, 4]", "concurrency = [1, 2]")
    path.write_text(text.replace("[tune]", f'args = ["--metrics-port", "{metrics_port}", "--linger", "1"]\n\n[tune]'))
    prom_url = scraping_prometheus(tmp, cleanups, metrics_port)
    start_s = time.time()
    run, run_log = start_logged(tmp, cleanups, "tune", bench.argv("tune", path, bench.out))
    assert run.wait(timeout=240) == 0, run_log.read_text()[-5000:]
    time.sleep(2)
    return Stack(prom_url, start_s, time.time(), json.loads((bench.out / "tune.json").read_text()))


@pytest.fixture(scope="module")
def tuned():
    try:
        yield side_by_side.result("tune-dashboard")
    finally:
        side_by_side.finish("tune-dashboard")


def by_load(series: list[dict]) -> dict[str, dict]:
    return {s["metric"]["load"]: s["metric"] for s in series}


def test_every_tune_panel_returns_data_after_the_tune(tuned):
    """'measuring now' is empty once the tune has ended (nothing is measured): over the tune's range it had data."""
    panels = tune_panels()
    assert len(panels) == 4
    for title, panel in panels.items():
        for t in panel["targets"]:
            now = title == "Tune: measuring now"
            assert finite_points(tuned.grafana(t["expr"], instant=t["instant"] and not now)) > 0, (title, t["expr"])


def test_the_tune_row_agrees_with_tune_json(tuned):
    doc, panels = tuned.results, tune_panels()
    leader, figure, state = (t["expr"] for t in panels["Tune: leader per load"]["targets"])
    leaders, states = by_load(tuned.grafana(leader, True)), by_load(tuned.grafana(state, True))
    values = {s["metric"]["load"]: float(s["value"][1]) for s in tuned.grafana(figure, True)}
    for a in doc["answers"]:
        load = str(a["concurrency"])
        assert leaders[load]["config"] == a["estimates"][0]["config"]
        assert values[load] == pytest.approx(a["estimates"][0]["value"])
        assert states[load]["state"] == ("open" if a["contenders"] else a["decision"])
    spent = {t["legendFormat"]: t["expr"] for t in panels["Tune: spent"]["targets"]}
    for legend, key in (("cells", "cells_measured"), ("requests", "requests_measured"), ("restarts", "restarts")):
        (series,) = tuned.grafana(spent[legend], True)
        assert float(series["value"][1]) == doc[key], legend
    (infeasible,) = tuned.grafana(panels["Tune: infeasible configurations"]["targets"][0]["expr"], True)
    assert infeasible["metric"]["config"] == "b64t1" == doc["infeasible"][0]["name"]
    measuring = tuned.query_range(panels["Tune: measuring now"]["targets"][0]["expr"])
    visited = {(s["metric"]["config"], s["metric"]["phase"]) for s in measuring}
    assert visited == {(v["config"], v["phase"]) for v in doc["visits"] if v["restarted"]}
