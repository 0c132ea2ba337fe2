"""The run overview's capacity-search row against a real Prometheus scraping a real `loadgen search`.

tests/test_prometheus_e2e.py reads every panel after a plain run, where the search row is empty by design. Here a
search (tests/reference_server.py with 8 slots: TTFT grows once requests queue, so a TTFT target is met up to
about 8) runs with its live exporter scraped every second; once it has exited, every query of the search row is
evaluated as Grafana would, and must return data that agrees with the search's results file: its answer, its
bracket, the cells it measured and its drift check.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests import side_by_side
from tests.reference_server import start, stop
from tests.test_prometheus_e2e import DASHBOARDS, PROMETHEUS, Stack, finite_points, free_port, start_logged, wait_http

pytestmark = [pytest.mark.infra, pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian "
                                                                            "package 'prometheus'; CI installs it)")]

SEARCH_ROW = "Capacity search (loadgen search)"


def search_targets() -> dict[str, dict]:
    """{panel title: panel} of the run overview's search row: the panels after its row, up to the next row."""
    panels = next(d for d in DASHBOARDS if d["uid"] == "loadgen-run-overview")["panels"]
    row = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == SEARCH_ROW)
    after = list(itertools.takewhile(lambda p: p["type"] != "row", panels[row + 1:]))
    return {p["title"]: p for p in after}


def wait_scraped(url: str, timeout_s: float = 20.0) -> None:
    """Until the loadgen job is a known target (Prometheus applies targets only every few seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=2) as r:
            if json.load(r)["data"]["activeTargets"]:
                return
        time.sleep(0.2)
    raise TimeoutError("prometheus has no target")


def scraping_prometheus(tmp: Path, cleanups, target_port: int) -> str:
    """A Prometheus scraping 127.0.0.1:`target_port` every second, its target known and applied; its URL."""
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "loadgen", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }))
    prom_url = f"http://127.0.0.1:{port}"
    prom, log = start_logged(tmp, cleanups, "prometheus", [
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
    wait_http(f"{prom_url}/-/ready", prom, log)
    wait_scraped(prom_url)
    time.sleep(5)  # the target pool applies a new target after up to 5 s: what runs next is scraped from its start
    return prom_url


@side_by_side.background("search-dashboard", when=PROMETHEUS is not None)
def build_searched(tmp: Path, cleanups) -> Stack:
    """The reference server, Prometheus and the search; built from the session's start (tests/side_by_side.py)."""
    server_url, server = start(tmp, "--slots", "8", "--step-ms", "5")
    cleanups.callback(stop, server)
    ports = {"loadgen": free_port()}
    prom_url = scraping_prometheus(tmp, cleanups, ports["loadgen"])
    start_s = time.time()
    out = tmp / "search.json"
    run, run_log = start_logged(tmp, cleanups, "search", [
        sys.executable, "-m", "loadgen", "search", "--url", server_url, "--contexts", "60", "--max-tokens", "32",
        "--slo", "ttft=60ms", "--max", "32", "--resolution", "4", "--probe-min-seconds", "3",
        "--metrics-port", str(ports["loadgen"]), "--linger", "3", "--out", str(out)])
    assert run.wait(timeout=240) == 0, run_log.read_text()[-5000:]
    time.sleep(2)
    return Stack(prom_url, start_s, time.time(), json.loads(out.read_text()))


@pytest.fixture(scope="module")
def searched():
    try:
        yield side_by_side.result("search-dashboard")
    finally:
        side_by_side.finish("search-dashboard")


def instant_value(stack: Stack, panel: dict) -> float:
    (series,) = stack.grafana(panel["targets"][0]["expr"], instant=True)
    assert series["metric"] == {"ctx": "60", "over": "concurrency"}
    return float(series["value"][1])


def test_every_search_panel_returns_data_after_the_search(searched):
    panels = search_targets()
    assert len(panels) == 4
    for title, panel in panels.items():
        for t in panel["targets"]:
            assert finite_points(searched.grafana(t["expr"], t["instant"])) > 0, (title, t["expr"])


def test_the_search_row_agrees_with_the_results_file(searched):
    panels = search_targets()
    answer = searched.results["search"]["answers"]["60"]
    assert instant_value(searched, panels["Search answer"]) == answer["met"]
    assert instant_value(searched, panels["Search cells measured"]) == len(answer["probes"])
    assert instant_value(searched, panels["Search drift check"]) == 0
    bracket = panels["Search probe and bracket"]["targets"]
    met, missed = (searched.grafana(t["expr"], instant=False) for t in bracket[1:])
    assert [float(v) for _, v in met[0]["values"]][-1] == answer["met"]
    assert [float(v) for _, v in missed[0]["values"]][-1] == answer["missed"]
    probes = {float(v) for s in searched.grafana(bracket[0]["expr"], instant=False) for _, v in s["values"]}
    assert probes <= {float(p) for p in answer["probes"]} and len(probes) >= 3  # it moved, through the loads probed
