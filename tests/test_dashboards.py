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
TOK_J_UNIT = "suffix: tok/J"


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


@pytest.mark.unit
def test_committed_json_is_what_the_generator_gives():
    rendered = GEN.render()
    assert sorted(rendered) == [p.name for p in FILES]
    for name, text in rendered.items():
        assert (GRAFANA / "dashboards" / name).read_text() == text, f"{name}: run python grafana/generate.py"


@pytest.mark.unit
def test_four_dashboards_with_unique_uids_and_titles():
    uids = [d["uid"] for d in DASHBOARDS.values()]
    titles = [d["title"] for d in DASHBOARDS.values()]
    assert len(DASHBOARDS) >= 4
    assert len(set(uids)) == len(uids) and len(set(titles)) == len(titles)
    assert {"loadgen-run-overview", "loadgen-spec-decoding", "loadgen-gpu-power", "loadgen-finished-cells"} <= set(uids)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panel_titles_are_unique_within_a_dashboard(name):
    titles = [p["title"] for p in DASHBOARDS[name]["panels"]]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_no_import_placeholders(name):
    text = (GRAFANA / "dashboards" / name).read_text()
    assert "${DS_" not in text and "__inputs" not in text


@pytest.mark.unit
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


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_windows_are_grafana_intervals_and_counters_are_only_rated(name):
    for title, ref, expr in GEN.panel_queries(DASHBOARDS[name]):
        for window in RANGE.findall(expr):
            assert window in ("$__rate_interval", "$__range", "$__range:"), (title, ref, window)
        for m in METRIC.finditer(expr):
            rest = expr[m.end():]
            rest = rest[rest.index("}") + 1:] if rest.startswith("{") else rest
            assert rest.startswith("["), f"{title}/{ref}: {m.group(1)} used without rate()/increase()"


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_heatmaps_read_classic_buckets(name):
    for p in panels(DASHBOARDS[name]):
        if p["type"] == "heatmap":
            (t,) = p["targets"]
            assert t["format"] == "heatmap" and t["legendFormat"] == "{{le}}" and "_bucket" in t["expr"]
            assert "by (le)" in t["expr"] and p["options"]["calculate"] is False


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
def test_dashboards_cover_the_questions_they_answer():
    def exprs(uid):
        dash = next(d for d in DASHBOARDS.values() if d["uid"] == uid)
        return " ".join(e for _, _, e in GEN.panel_queries(dash))

    overview = exprs("loadgen-run-overview")
    for needle in ("loadgen_output_tokens_total", "loadgen_requests_total", "loadgen_ttft_seconds_bucket",
                   "loadgen_request_output_tokens_per_second_bucket", "loadgen_e2e_latency_seconds_bucket",
                   'outcome!~"ok|abandoned"', "loadgen_in_flight_requests", "loadgen_target_concurrency",
                   "loadgen_verify_checked_requests", "loadgen_verify_garbage_ratio",
                   "loadgen_verify_exact_match_ratio"):
        assert needle in overview, needle
    spec = exprs("loadgen-spec-decoding")
    for needle in ("sglang:spec_accept_length", "sglang:spec_verify_calls_total", "loadgen_chunks_total",
                   "loadgen_accept_length"):
        assert needle in spec, needle
    for needle in ("sglang:token_usage", "sglang:queue_time_seconds_bucket", "sglang:cache_hit_rate",
                   "sglang:inter_token_latency_seconds_bucket", "sglang:e2e_request_latency_seconds_bucket"):
        assert needle in overview, needle
    gpu = exprs("loadgen-gpu-power")
    for needle in ("DCGM_FI_DEV_POWER_USAGE", "instance_gpu:gpu_power_limit_watts:best",
                   "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_UTIL", "loadgen_energy_per_output_token_joules",
                   "loadgen_output_tokens_per_joule", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                   "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_XID_ERRORS"):
        assert needle in gpu, needle
    cells = exprs("loadgen-finished-cells")
    for needle in ("loadgen_run_info", "loadgen_cell_output_tokens_per_second", "loadgen_cell_ttft_p99_seconds"):
        assert needle in cells, needle


def _all_panels():
    return [(name, p) for name, d in DASHBOARDS.items() for p in panels(d)]


@pytest.mark.unit
def test_per_cell_panels_read_finished_cells_over_the_time_range():
    """Bar gauges, tables and bar charts are instant queries at the end of the range: they must not need the
    exporter to be up then."""
    for name, p in _all_panels():
        if p["type"] in ("bargauge", "table", "barchart"):
            for t in p["targets"]:
                assert t["instant"] and "last_over_time(" in t["expr"] and "[$__range]" in t["expr"], (name, p["title"])


@pytest.mark.unit
def test_the_finished_cells_table_has_the_terminal_matrix_columns():
    """The terminal table's columns (loadgen/report/table.py): ctx and conc are label columns, ok/fail is two."""
    dash = next(d for d in DASHBOARDS.values() if d["uid"] == "loadgen-finished-cells")
    matrix = next(p for p in panels(dash) if p["title"].startswith("Finished cells"))
    organize = matrix["transformations"][1]["options"]
    assert {"context_tokens", "concurrency", "request_rate"} <= set(organize["indexByName"])
    assert set(organize["renameByName"].values()) >= {
        "ok", "failed", "out tok/s", "req tok/s", "req tok/s p10", "TTFT mean", "TTFT p50", "TTFT p99", "pp tok/s",
        "E2E mean", "tok/chk", "accept", "W", "J/tok"}


@pytest.mark.unit
def test_every_dashboard_marks_cells_and_selects_runs_by_label():
    for name, dash in DASHBOARDS.items():
        (cells,) = [a for a in dash["annotations"]["list"] if a.get("name") == "Cells"]
        assert "loadgen_cell_active" in cells["expr"] and cells["datasource"] == DS, name
        assert "request_rate" in cells["expr"], name
        var = variables(dash)
        assert var["label"]["definition"] == "label_values(loadgen_run_info, label)", name
        assert "$label" in var["run"]["definition"], name


@pytest.mark.unit
def test_ratios_never_divide_by_a_zero_rate():
    """J/token and tok/J: a zero denominator (power flows, no tokens complete) gives no value, not +Inf."""
    for name, p in _all_panels():
        if p["fieldConfig"]["defaults"]["unit"] in ("joule", TOK_J_UNIT) and p["type"] == "timeseries":
            for t in p["targets"]:
                assert "> 0)" in t["expr"], (name, p["title"], t["expr"])


@pytest.mark.unit
def test_recording_rules_used_by_dashboards_exist():
    recorded = {r["record"] for f in (ROOT / "prometheus" / "rules").glob("*.yml")
                for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"] if "record" in r}
    text = " ".join(e for d in DASHBOARDS.values() for _, _, e in GEN.panel_queries(d))
    used = set(re.findall(r"\b([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)\b", text))
    assert used and used <= recorded, used - recorded


@pytest.mark.unit
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


@pytest.mark.unit
def test_server_metrics_in_dashboards_and_rules_are_the_engine_adapters():
    """The dashboards take the server's metric names from its adapter by role; the hand-written rules may name no
    other (a histogram's series: the adapter's name and a suffix)."""
    from loadgen.engines.sglang import ADAPTER
    names = {m.name for m in ADAPTER.metrics}
    text = " ".join(e for d in DASHBOARDS.values() for _, _, e in GEN.panel_queries(d))
    text += " ".join(p.read_text() for p in (ROOT / "prometheus" / "rules").glob("*.yml"))
    used = set(re.findall(r"(?<![\w:])(sglang:[a-z0-9_]+)", text))
    base = {re.sub(r"_(bucket|sum|count)$", "", u) if u not in names else u for u in used}
    assert used and base <= names, base - names
    assert {m.role: m.name for m in ADAPTER.metrics} == GEN.SERVER


@pytest.mark.unit
def test_substitute_replaces_grafana_variables():
    values = {"__rate_interval": "10s", "run": ".*"}
    assert GEN.substitute('rate(x{run=~"$run"}[$__rate_interval])', values) == 'rate(x{run=~".*"}[10s])'
    assert GEN.substitute('x{run=~"${run}"}', values) == 'x{run=~".*"}'
    with pytest.raises(KeyError):
        GEN.substitute("x[$__interval]", values)


@pytest.mark.unit
def test_provisioning_datasource_and_provider():
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "loadgen.yml").read_text())
    prom = next(d for d in ds["datasources"] if d["type"] == "prometheus")
    assert prom["uid"] and prom["isDefault"] and prom["url"].startswith("http")
    assert prom["jsonData"]["timeInterval"] == "5s"
    prov = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "loadgen.yml").read_text())
    (provider,) = prov["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/var/lib/grafana/dashboards")


@pytest.mark.infra
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
