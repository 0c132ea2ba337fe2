"""End to end against a real Prometheus (Debian's 2.42 in CI), read the way Grafana reads it, after the run.

A simulator (SGLang-named /metrics plus a DCGM-compatible endpoint that, like dcgm-exporter's stock counters,
exports no power limit) and a real `loadgen` run with its live exporter (a 30 s cell and the drift check's control,
`--label`, `--gpu-power-limit`) are scraped every second by a Prometheus on a free loopback port, with our rule files
loaded. Once loadgen has exited, every panel query of every dashboard is evaluated as Grafana would: instant
targets as instant queries at the end of the time range, range targets over it; each must return data (the
search and tune rows none: a plain run has no search or tune state; tests/test_search_dashboard.py and
tests/test_tune_dashboard.py read them), and the per-cell panels must equal the run's results JSON
within 2 %. Every recording rule and variable query returns
data, every rule evaluates without error, nothing fires after the run, and the cell annotations span each
cell.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from exporters.cell_results import CELL_RESULTS, summary_value
from loadgen.results.cell_result import from_json
from tests import side_by_side
from tests.conftest import stop_process

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
RULE_FILES = sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
JOBS = ("loadgen", "sglang", "dcgm")

pytestmark = [pytest.mark.infra, pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                reason="prometheus/promtool not installed (Debian package 'prometheus'; "
                                       "CI installs it)")]


def _load_generator():
    spec = importlib.util.spec_from_file_location("grafana_generate", ROOT / "grafana" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _load_generator()
DASHBOARDS = [json.loads(p.read_text()) for p in sorted((ROOT / "grafana" / "dashboards").glob("*.json"))]
PANEL_TARGETS = [(d["uid"], p["title"], t["refId"], t["expr"], t["instant"]) for d in DASHBOARDS
                 for p in d["panels"] for t in p.get("targets", [])]
VARIABLE_QUERIES = sorted({(v["name"], v["definition"]) for d in DASHBOARDS
                           for v in d["templating"]["list"] if v["type"] == "query"})
RECORDING_RULES = [(r["record"], r["expr"]) for path in RULE_FILES
                   for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"] if "record" in r]
# what Grafana would send with every variable on "All"; the rate interval is 10 scrapes
ALL = {"__rate_interval": "10s", "__interval": "2s", "label": ".*", "run": ".*", "concurrency": ".*", "context_tokens": ".*",
       "model": ".*", "instance": ".*", "gpu": ".*"}


SEARCH_ONLY = "loadgen_search_"  # metrics of `loadgen search` (exporters/search_metrics.py), absent in a plain run
TUNE_ONLY = "loadgen_tune_"  # metrics of `loadgen tune` (exporters/tune_metrics.py), absent in a plain run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:3]} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout_s}s: {log.read_text()[-2000:]}")


def wait_scraping(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 20.0) -> None:
    """Until every job has been scraped once: Prometheus applies discovered targets only every 5 s, so the
    first seconds after /-/ready would be lost for a short run (the loadgen target is down until it starts)."""
    deadline = time.monotonic() + timeout_s
    query = urllib.parse.urlencode({"query": "count(up)"})
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited {proc.returncode}: {log.read_text()[-2000:]}")
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=2) as r:
            result = json.load(r)["data"]["result"]
        if result and int(float(result[0]["value"][1])) == len(JOBS):
            return
        time.sleep(0.2)
    raise TimeoutError(f"prometheus did not scrape all of {JOBS} within {timeout_s}s")


def prometheus_config(ports: dict[str, int]) -> dict:
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{ports[job]}"]}]}
                           for job in JOBS],
    }


CELL_S = 30  # long enough for the live-rate rule (it reads a cell once it is 25 s old)
LIMIT_W = 1100.0


def loadgen_argv(sim_port: int, dcgm_port: int, metrics_port: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "loadgen", "--url", f"http://127.0.0.1:{sim_port}", "--concurrency", "4",
            "--contexts", "60", "--max-tokens", "64", "--duration-per-cell", str(CELL_S), "--metrics-port",
            str(metrics_port), "--linger", "3", "--dcgm", f"http://127.0.0.1:{dcgm_port}/metrics",
            "--label", "e2e-b8", "--gpu-power-limit", f"{LIMIT_W:g}", "--slo", "ttft=2s,tpot=1s",  # SLO panels too
            "--verify", "--out", str(out),  # and the verification panels
            # the control cell, live too: `on`, as `auto` measures it again only after a second cell (60 s, not 90)
            "--drift-check", "on"]


@dataclass
class Stack:
    url: str
    start: float
    end: float
    results: dict

    def api(self, path: str, params: dict) -> dict:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query_range(self, expr: str) -> list[dict]:
        """The expression over the whole run (and its linger), one point per second."""
        return self.api("query_range", {"query": expr, "start": self.start, "end": self.end, "step": "1"})["result"]

    def query(self, expr: str) -> list[dict]:
        """The expression at the end of the time range (after loadgen has exited), as an instant panel reads it."""
        return self.api("query", {"query": expr, "time": self.end})["result"]

    def grafana(self, expr: str, instant: bool, **chosen: str) -> list[dict]:
        """A panel target as Grafana evaluates it over [start, end], its variables on "All" but those `chosen`."""
        values = {**ALL, "__range": f"{math.ceil(self.end - self.start)}s", **chosen}
        expr = GEN.substitute(expr, values)
        return self.query(expr) if instant else self.query_range(expr)

    def last(self, expr: str) -> float:
        """The last finite value of a single-series expression during the run."""
        (series,) = self.query_range(expr)
        return [float(v) for _, v in series["values"] if math.isfinite(float(v))][-1]


def finite_points(result: list[dict]) -> int:
    """Finite values of a range ("values") or instant ("value") result."""
    points = [v for s in result for _, v in s.get("values", [s["value"]] if "value" in s else [])]
    return sum(math.isfinite(float(v)) for v in points)


def start_logged(tmp: Path, cleanups, name: str, argv: list[str]) -> tuple[subprocess.Popen, Path]:
    """`argv` with its output in `tmp/<name>.log`, stopped (SIGTERM, then SIGKILL after 10 s) by `cleanups`."""
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    cleanups.callback(stop_process, proc)
    return proc, log


@side_by_side.background("prometheus-e2e", when=PROMETHEUS is not None and PROMTOOL is not None)
def build_stack(tmp: Path, cleanups) -> Stack:
    """The simulator, Prometheus scraping it and loadgen, and the run; built from the session's start
    (tests/side_by_side.py): it is mostly 60 s of cells."""
    ports = {"sglang": free_port(), "dcgm": free_port(), "loadgen": free_port(), "prometheus": free_port()}
    sim, sim_log = start_logged(tmp, cleanups, "sim", [
        sys.executable, "-m", "loadgen", "sim", "--port", str(ports["sglang"]), "--dcgm-port", str(ports["dcgm"]),
        "--gpus", "2", "--speed", "8", "--dcgm-no-limit"])
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config(ports)))
    prom_url = f"http://127.0.0.1:{ports['prometheus']}"
    prom, prom_log = start_logged(tmp, cleanups, "prometheus", [
        PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{ports['prometheus']}", "--log.level=warn"])
    wait_http(f"http://127.0.0.1:{ports['sglang']}/health", sim, sim_log)
    wait_http(f"http://127.0.0.1:{ports['dcgm']}/metrics", sim, sim_log)
    wait_http(f"{prom_url}/-/ready", prom, prom_log)
    wait_scraping(prom_url, prom, prom_log)
    start_s = time.time()
    out = tmp / "r.json"
    run, run_log = start_logged(tmp, cleanups, "loadgen", loadgen_argv(ports["sglang"], ports["dcgm"],
                                                                       ports["loadgen"], out))
    assert run.wait(timeout=180) == 0, run_log.read_text()[-5000:]
    time.sleep(3)  # loadgen has exited: Prometheus marks its series stale, the rules evaluate once more
    return Stack(prom_url, start_s, time.time(), json.loads(out.read_text()))


@pytest.fixture(scope="module")
def stack():
    try:
        yield side_by_side.result("prometheus-e2e")
    finally:
        side_by_side.finish("prometheus-e2e")


def test_every_target_was_scraped(stack):
    for job in JOBS:
        assert stack.query_range(f'max(up{{job="{job}"}}) == 1'), f"{job} never up"


@pytest.mark.parametrize("uid,title,ref,expr,instant", PANEL_TARGETS,
                         ids=[f"{uid}/{title}/{ref}" for uid, title, ref, _, _ in PANEL_TARGETS])
def test_every_panel_returns_data_after_the_run(stack, uid, title, ref, expr, instant):
    result = stack.grafana(expr, instant)
    if SEARCH_ONLY in expr or TUNE_ONLY in expr:  # their rows' gauges exist only while a search or a tune runs
        assert finite_points(result) == 0, f"a search or tune gauge after a plain run: {expr}"
        return
    assert finite_points(result) > 0, f"no data ({'instant' if instant else 'range'}): {expr}"


@pytest.mark.parametrize("record,expr", RECORDING_RULES, ids=[r for r, _ in RECORDING_RULES])
def test_every_recording_rule_returns_data_and_is_recorded(stack, record, expr):
    assert finite_points(stack.query_range(expr)) > 0, f"expression returns no data: {expr}"
    assert finite_points(stack.query_range(record)) > 0, f"{record} was never recorded"


def test_every_rule_evaluates_without_error(stack):
    groups = stack.api("rules", {})["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == sum(len(g["rules"]) for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"])
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad


@pytest.mark.parametrize("name,definition", VARIABLE_QUERIES, ids=[n for n, _ in VARIABLE_QUERIES])
def test_every_variable_query_returns_values(stack, name, definition):
    m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", definition)
    assert m, definition
    selector = GEN.substitute(m.group(1), ALL)
    values = stack.api(f"label/{m.group(2)}/values", {"match[]": selector, "start": stack.start, "end": stack.end})
    assert values, f"{name}: {definition} gives nothing"


def _dashboard(uid: str) -> dict:
    return next(d for d in DASHBOARDS if d["uid"] == uid)


def _cell_of(results: dict, labels: dict) -> dict:
    (cell,) = [c for c in results["cells"] if str(c["concurrency"]) == labels["concurrency"]
               and str(c["context_tokens"]) == labels["context_tokens"] and c.get("request_rate") is None]
    return cell


PER_CELL_METRIC = re.compile(r"last_over_time\((loadgen_\w+)\{")


def test_per_cell_panels_equal_the_results_json_after_the_run(stack):
    """The finished-cells table and every per-cell bar gauge: one value per cell, the results JSON's within 2 %;
    and one for the drift check's control (run `<run>-control`), its output tok/s the drift part's."""
    paths = {name: path for path, name, _ in CELL_RESULTS.values()}
    again = stack.results["drift"]["again"]
    runs = sorted([c["run_id"] for c in stack.results["cells"]] + [again["run_id"]])
    per_cell = [p for d in DASHBOARDS for p in d["panels"] if p["type"] in ("table", "bargauge")]
    compared = 0
    for panel in per_cell:
        for t in panel["targets"]:
            if TUNE_ONLY in t["expr"]:
                continue  # the tune row's tables: tests/test_tune_dashboard.py
            metric = PER_CELL_METRIC.search(t["expr"]).group(1)
            if metric not in paths:
                continue  # loadgen_run_info: checked below
            result = stack.grafana(t["expr"], t["instant"])
            assert sorted(r["metric"]["run"] for r in result) == runs, (panel["title"], metric, result)
            for series in result:
                if series["metric"]["run"] == again["run_id"]:  # not a cell of the results: checked below
                    continue
                expected = summary_value(from_json(_cell_of(stack.results, series["metric"])), paths[metric])
                assert expected is not None, (panel["title"], metric)
                assert float(series["value"][1]) == pytest.approx(expected, rel=0.02, abs=1e-9), (panel["title"], metric)
                compared += 1
    assert compared >= 20 * len(stack.results["cells"]) - 1
    span = f"{math.ceil(stack.end - stack.start)}s"
    tok_s = f'loadgen_cell_output_tokens_per_second{{run="{again["run_id"]}"}}'
    (control,) = stack.query(f"last_over_time({tok_s}[{span}])")
    assert float(control["value"][1]) == pytest.approx(again["output_tok_s"], rel=0.02)


def test_run_info_identifies_the_run_by_label_model_and_settings(stack):
    (info,) = stack.query(f'last_over_time(loadgen_run_info[{math.ceil(stack.end - stack.start)}s])')
    labels = info["metric"]
    assert labels["label"] == "e2e-b8" and labels["run"] == stack.results["cells"][0]["run_id"]
    assert labels["engine"] == "sglang" and labels["model"] and labels["spec_algorithm"] == "DDTREE"
    assert labels["spec_budget"] == "8" and labels["spec_topk"] == "4"


def test_the_power_limit_comes_from_the_flag_when_dcgm_exports_none(stack):
    (ratio,) = stack.grafana(next(t["expr"] for p in _dashboard("loadgen-gpu-power")["panels"]
                                  if p["title"].startswith("Power / limit") for t in p["targets"]), instant=False)
    assert ratio["metric"] == {"source": "flag"}
    limits = stack.query_range("instance_gpu:gpu_power_limit_watts:best")
    assert len(limits) == 2 and all(float(v) == LIMIT_W for s in limits for _, v in s["values"])


def test_cell_annotations_span_each_cell(stack):
    """The dashboards' cell annotation: one region per cell, from its start to its end (within two scrapes), and
    one for the drift check's control (the first cell measured again, under run `<run>-control`)."""
    dash = _dashboard("loadgen-run-overview")
    (cells,) = [a for a in dash["annotations"]["list"] if a.get("name") == "Cells"]
    regions = stack.grafana(cells["expr"], instant=False)
    control = stack.results["drift"]["again"]["run_id"]
    assert sorted(r["metric"]["run"] for r in regions) == sorted([c["run_id"] for c in stack.results["cells"]]
                                                                 + [control])
    span = f"{math.ceil(stack.end - stack.start)}s"
    for region in regions:
        sel = ", ".join(f'{k}="{v}"' for k, v in region["metric"].items())
        (start,) = stack.query(f"last_over_time(loadgen_cell_start_timestamp_seconds{{{sel}}}[{span}])")
        (end,) = stack.query(f"last_over_time(loadgen_cell_end_timestamp_seconds{{{sel}}}[{span}])")
        first, last = region["values"][0][0], region["values"][-1][0]
        assert abs(first - float(start["value"][1])) <= 2.5 and abs(last - float(end["value"][1])) <= 2.5
        assert last - first >= CELL_S - 3


def test_choosing_the_run_keeps_its_drift_control_cell(stack):
    """The Run variable lists loadgen_run_info's runs only; choosing one still shows its `<run>-control` cell."""
    dash = _dashboard("loadgen-run-overview")
    (cells,) = [a for a in dash["annotations"]["list"] if a.get("name") == "Cells"]
    run_id = stack.results["cells"][0]["run_id"]
    assert re.fullmatch(r"[\w-]+", run_id)  # Grafana escapes a value's regex characters: this one has none
    regions = stack.grafana(cells["expr"], instant=False, run=run_id)
    assert {r["metric"]["run"] for r in regions} == {run_id, stack.results["drift"]["again"]["run_id"]}


def test_nothing_fires_after_the_run(stack):
    assert stack.query('ALERTS{alertstate="firing"}') == []


def test_compute_idle_is_caught_within_a_cell_with_the_flag_s_limit(stack):
    """The simulated GPUs draw at most 450 W of the 1100 W that only --gpu-power-limit tells: 15 s into a 30 s
    cell the alert is pending (it fires 15 s later, at the cell's end at the earliest), and after the run it is
    gone."""
    states = stack.query_range('ALERTS{alertname="GPUComputeIdleUnderLoad"}')
    assert states, "never pending during the run"
    assert {s["metric"]["alertstate"] for s in states} <= {"pending", "firing"}
    first = min(t for s in states for t, _ in s["values"])
    assert first - stack.start <= CELL_S + 10  # within the first cell (after loadgen's start-up)
    assert stack.query('ALERTS{alertname="GPUComputeIdleUnderLoad"}') == []


def test_the_finished_run_becomes_its_configuration_s_baseline(stack):
    baseline = stack.query("config:loadgen_cell_output_tokens_per_second:median7d")
    assert len(baseline) == len(stack.results["cells"])
    for series in baseline:
        assert series["metric"]["label"] == "e2e-b8"
        expected = _cell_of(stack.results, series["metric"])["output_tok_s"]
        assert float(series["value"][1]) == pytest.approx(expected, rel=1e-9)


def test_promtool_check_config_and_rules(tmp_path):
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config({"loadgen": 1, "sglang": 2, "dcgm": 3})))
    for argv in (["check", "config", str(config)], ["check", "config", str(ROOT / "prometheus" / "prometheus.yml")],
                 ["check", "rules", *map(str, RULE_FILES)],
                 ["test", "rules", str(ROOT / "prometheus" / "tests" / "alerts_test.yml")]):
        out = subprocess.run([PROMTOOL, *argv], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert out.returncode == 0, " ".join(argv) + "\n" + out.stdout + out.stderr
