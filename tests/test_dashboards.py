"""Grafana dashboards: generated == committed, lint rules (datasource, units, windows, variables, layout),
metric names that the exporter really serves, and PromQL syntax through promtool."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from exporters.live import LiveExporter

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}
RANGE = re.compile(r"\[([^\]]+)\]")
METRIC = re.compile(r"(?<![\w:$])([a-zA-Z_:][\w:]*_(?:total|bucket))\b")
VAR_USE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")


def load_generator():
    spec = importlib.util.spec_from_file_location("grafana_generate", GRAFANA / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = load_generator()
FILES = sorted((GRAFANA / "dashboards").glob("*.json"))
DASHBOARDS = {p.name: json.loads(p.read_text()) for p in FILES}


def panels(dash: dict) -> list[dict]:
    return [q for p in dash["panels"] for q in [p, *p.get("panels", [])] if q["type"] != "row"]


def variables(dash: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dash["templating"]["list"]}


def test_committed_json_is_what_the_generator_gives():
    rendered = GEN.render()
    assert sorted(rendered) == [p.name for p in FILES]
    for name, text in rendered.items():
        assert (GRAFANA / "dashboards" / name).read_text() == text, f"{name}: run python grafana/generate.py"


def test_three_dashboards_with_unique_uids_and_titles():
    uids = [d["uid"] for d in DASHBOARDS.values()]
    titles = [d["title"] for d in DASHBOARDS.values()]
    assert len(DASHBOARDS) >= 3
    assert len(set(uids)) == len(uids) and len(set(titles)) == len(titles)
    assert {"loadgen-run-overview", "loadgen-spec-decoding", "loadgen-gpu-power"} <= set(uids)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panel_titles_are_unique_within_a_dashboard(name):
    titles = [p["title"] for p in DASHBOARDS[name]["panels"]]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_no_import_placeholders(name):
    text = (GRAFANA / "dashboards" / name).read_text()
    assert "${DS_" not in text and "__inputs" not in text


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_panel_has_title_description_unit_and_the_datasource_variable(name):
    for p in panels(DASHBOARDS[name]):
        assert p["title"] and len(p["description"]) > 20, p["title"]
        assert p["fieldConfig"]["defaults"]["unit"], p["title"]
        assert p["datasource"] == DS, p["title"]
        assert p["targets"], p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS and t["expr"].strip(), p["title"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_windows_are_grafana_intervals_and_counters_are_only_rated(name):
    for title, ref, expr in GEN.panel_queries(DASHBOARDS[name]):
        for window in RANGE.findall(expr):
            assert window in ("$__rate_interval", "$__range"), (title, ref, window)
        for m in METRIC.finditer(expr):
            rest = expr[m.end():]
            rest = rest[rest.index("}") + 1:] if rest.startswith("{") else rest
            assert rest.startswith("["), f"{title}/{ref}: {m.group(1)} used without rate()/increase()"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_heatmaps_read_classic_buckets(name):
    for p in panels(DASHBOARDS[name]):
        if p["type"] == "heatmap":
            (t,) = p["targets"]
            assert t["format"] == "heatmap" and t["legendFormat"] == "{{le}}" and "_bucket" in t["expr"]
            assert "by (le)" in t["expr"] and p["options"]["calculate"] is False


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_variables_datasource_first_and_every_reference_defined(name):
    dash = DASHBOARDS[name]
    var_list = dash["templating"]["list"]
    assert var_list[0]["type"] == "datasource" and var_list[0]["query"] == "prometheus"
    defined = variables(dash)
    assert {"run", "concurrency"} <= set(defined)
    for v in var_list[1:]:
        assert v["datasource"] == DS and v["refresh"] == 2 and v["definition"].startswith("label_values(")
    used = set()
    for _, _, expr in GEN.panel_queries(dash):
        used |= {a or b for a, b in VAR_USE.findall(expr)}
    for v in var_list[1:]:
        used |= {a or b for a, b in VAR_USE.findall(v["definition"])}
    builtins = {"__rate_interval", "__interval", "__range"}
    assert used - builtins <= set(defined), used - builtins - set(defined)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_layout_fits_the_grid_without_overlaps(name):
    taken = set()
    ids = [p["id"] for p in DASHBOARDS[name]["panels"]]
    assert len(ids) == len(set(ids))
    for p in DASHBOARDS[name]["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, p["title"]
        taken |= cells


def test_dashboards_cover_what_the_issue_asks():
    def exprs(uid):
        dash = next(d for d in DASHBOARDS.values() if d["uid"] == uid)
        return " ".join(e for _, _, e in GEN.panel_queries(dash))

    overview = exprs("loadgen-run-overview")
    for needle in ("loadgen_output_tokens_total", "loadgen_requests_total", "loadgen_ttft_seconds_bucket",
                   "loadgen_request_output_tokens_per_second_bucket", "loadgen_e2e_latency_seconds_bucket",
                   'outcome!="ok"', "loadgen_in_flight_requests", "loadgen_target_concurrency"):
        assert needle in overview, needle
    spec = exprs("loadgen-spec-decoding")
    for needle in ("sglang:spec_accept_length", "sglang:spec_verify_calls_total", "loadgen_chunks_total",
                   "loadgen_accept_length"):
        assert needle in spec, needle
    gpu = exprs("loadgen-gpu-power")
    for needle in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                   "DCGM_FI_DEV_GPU_UTIL", "loadgen_energy_per_output_token_joules",
                   "loadgen_output_tokens_per_joule"):
        assert needle in gpu, needle


def test_loadgen_metrics_in_dashboards_and_rules_are_served_by_the_exporter():
    served = set()
    for family in LiveExporter("r").registry.collect():
        served.add(family.name)
        if family.type == "counter":
            served.add(family.name + "_total")
        if family.type == "histogram":
            served |= {family.name + s for s in ("_bucket", "_sum", "_count")}
    text = " ".join(e for d in DASHBOARDS.values() for _, _, e in GEN.panel_queries(d))
    text += " ".join(p.read_text() for p in (ROOT / "prometheus" / "rules").glob("*.yml"))
    used = set(re.findall(r"(?<![\w:])(loadgen_[a-z0-9_]+)", text))
    assert used, "no loadgen metrics referenced"
    assert used <= served, used - served


def test_substitute_replaces_grafana_variables():
    values = {"__rate_interval": "10s", "run": ".*"}
    assert GEN.substitute('rate(x{run=~"$run"}[$__rate_interval])', values) == 'rate(x{run=~".*"}[10s])'
    assert GEN.substitute('x{run=~"${run}"}', values) == 'x{run=~".*"}'
    with pytest.raises(KeyError):
        GEN.substitute("x[$__interval]", values)


def test_provisioning_datasource_and_provider():
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "loadgen.yml").read_text())
    prom = next(d for d in ds["datasources"] if d["type"] == "prometheus")
    assert prom["uid"] and prom["isDefault"] and prom["url"].startswith("http")
    assert prom["jsonData"]["timeInterval"] == "5s"
    prov = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "loadgen.yml").read_text())
    (provider,) = prov["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/var/lib/grafana/dashboards")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package 'prometheus')")
def test_every_panel_query_parses(tmp_path):
    values = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h", "run": ".*", "concurrency": ".*",
              "context_tokens": ".*", "model": ".*", "instance": ".*", "gpu": ".*"}
    rules = []
    for dash in DASHBOARDS.values():
        for i, (_title, _ref, expr) in enumerate(GEN.panel_queries(dash)):
            rules.append({"record": f"dashboard:{dash['uid'].replace('-', '_')}:q{i}",
                          "expr": GEN.substitute(expr, values)})
    path = tmp_path / "dashboards.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    out = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
