"""End to end against a real Prometheus (Debian's 2.42 in CI).

A simulator (SGLang-named /metrics plus a DCGM-compatible endpoint) and a real `loadgen` run with its live
exporter are scraped every second by a Prometheus on a free loopback port, with our rule files loaded. Then
every query of every dashboard panel, every recording rule and every variable query must return data
through the HTTP API, every rule must evaluate without error, and what Prometheus scraped from the exporter
must agree with the run's results JSON.
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

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
RULE_FILES = sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
JOBS = ("loadgen", "sglang", "dcgm")

pytestmark = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                reason="prometheus/promtool not installed (Debian package 'prometheus'; "
                                       "CI installs it)")


def _load_generator():
    spec = importlib.util.spec_from_file_location("grafana_generate", ROOT / "grafana" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _load_generator()
DASHBOARDS = [json.loads(p.read_text()) for p in sorted((ROOT / "grafana" / "dashboards").glob("*.json"))]
PANEL_QUERIES = [(d["uid"], title, ref, expr) for d in DASHBOARDS for title, ref, expr in GEN.panel_queries(d)]
VARIABLE_QUERIES = sorted({(v["name"], v["definition"]) for d in DASHBOARDS
                           for v in d["templating"]["list"] if v["type"] == "query"})
RECORDING_RULES = [(r["record"], r["expr"]) for path in RULE_FILES
                   for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"] if "record" in r]
# what Grafana would send with every variable on "All"; the rate interval is 10 scrapes
ALL = {"__rate_interval": "10s", "__interval": "2s", "run": ".*", "concurrency": ".*", "context_tokens": ".*",
       "model": ".*", "instance": ".*", "gpu": ".*"}


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


def loadgen_argv(sim_port: int, dcgm_port: int, metrics_port: int, out: Path) -> list[str]:
    # a timed cell: at --speed 8 a 40-request cell ends in ~0.4 s, before a single 1 s scrape sees it active
    return [sys.executable, "-m", "loadgen", "--url", f"http://127.0.0.1:{sim_port}", "--concurrency", "4",
            "--contexts", "60", "--max-tokens", "64", "--duration-per-cell", "6", "--metrics-port",
            str(metrics_port), "--linger", "5", "--dcgm", f"http://127.0.0.1:{dcgm_port}/metrics",
            "--out", str(out)]


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

    def last(self, expr: str) -> float:
        """The last finite value of a single-series expression during the run."""
        (series,) = self.query_range(expr)
        return [float(v) for _, v in series["values"] if math.isfinite(float(v))][-1]


def finite_points(result: list[dict]) -> int:
    return sum(math.isfinite(float(v)) for s in result for _, v in s["values"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prom-e2e")
    ports = {"sglang": free_port(), "dcgm": free_port(), "loadgen": free_port(), "prometheus": free_port()}
    procs: list[subprocess.Popen] = []

    def start(name: str, argv: list[str]) -> tuple[subprocess.Popen, Path]:
        log = tmp / f"{name}.log"
        proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        procs.append(proc)
        return proc, log

    try:
        sim, sim_log = start("sim", [sys.executable, "-m", "loadgen", "sim", "--port", str(ports["sglang"]),
                                     "--dcgm-port", str(ports["dcgm"]), "--gpus", "2", "--speed", "8"])
        wait_http(f"http://127.0.0.1:{ports['sglang']}/health", sim, sim_log)
        wait_http(f"http://127.0.0.1:{ports['dcgm']}/metrics", sim, sim_log)
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump(prometheus_config(ports)))
        prom_url = f"http://127.0.0.1:{ports['prometheus']}"
        prom, prom_log = start("prometheus", [PROMETHEUS, f"--config.file={config}",
                                              f"--storage.tsdb.path={tmp / 'data'}",
                                              f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
                                              "--log.level=warn"])
        wait_http(f"{prom_url}/-/ready", prom, prom_log)
        wait_scraping(prom_url, prom, prom_log)
        start_s = time.time()
        out = tmp / "r.json"
        run = subprocess.run(loadgen_argv(ports["sglang"], ports["dcgm"], ports["loadgen"], out), cwd=ROOT,
                             capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        time.sleep(2)  # the rules evaluate the last scrapes
        yield Stack(prom_url, start_s, time.time(), json.loads(out.read_text()))
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_every_target_was_scraped(stack):
    for job in JOBS:
        assert stack.query_range(f'max(up{{job="{job}"}}) == 1'), f"{job} never up"


@pytest.mark.parametrize("uid,title,ref,expr", PANEL_QUERIES,
                         ids=[f"{uid}/{title}/{ref}" for uid, title, ref, _ in PANEL_QUERIES])
def test_every_dashboard_query_returns_data(stack, uid, title, ref, expr):
    values = {**ALL, "__range": f"{math.ceil(stack.end - stack.start)}s"}
    result = stack.query_range(GEN.substitute(expr, values))
    assert finite_points(result) > 0, f"no data: {GEN.substitute(expr, values)}"


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


def test_exporter_agrees_with_the_results_json(stack):
    (cell,) = stack.results["cells"]
    sel = f'run=~".+", concurrency="{cell["concurrency"]}", context_tokens="{cell["context_tokens"]}"'
    assert stack.last(f'sum(loadgen_requests_total{{{sel}, outcome="ok"}})') == cell["requests"]["ok"]
    assert stack.last(f"sum(loadgen_output_tokens_total{{{sel}}})") == cell["output_tokens"]
    assert stack.last(f"max(loadgen_cell_output_tokens_per_second{{{sel}}})") == pytest.approx(cell["output_tok_s"])
    assert stack.last(f"max(loadgen_accept_length{{{sel}}})") == pytest.approx(cell["accept_length"]["value"])


def test_promtool_check_config_and_rules(tmp_path):
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config({"loadgen": 1, "sglang": 2, "dcgm": 3})))
    for argv in (["check", "config", str(config)], ["check", "config", str(ROOT / "prometheus" / "prometheus.yml")],
                 ["check", "rules", *map(str, RULE_FILES)],
                 ["test", "rules", str(ROOT / "prometheus" / "tests" / "alerts_test.yml")]):
        out = subprocess.run([PROMTOOL, *argv], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert out.returncode == 0, " ".join(argv) + "\n" + out.stdout + out.stderr
