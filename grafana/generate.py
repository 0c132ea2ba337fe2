"""Grafana dashboards for loadgen, generated from code.

    python grafana/generate.py          # rewrite grafana/dashboards/*.json
    python grafana/generate.py --check  # exit 1 when the committed files differ from this generator

Hand-written builders over plain dicts (no Grafana SDK): what you read here is what the JSON holds. The server's
metric names are its engine adapter's, by role (`loadgen/engines/sglang.py`, `SERVER` here), the one place
loadgen names them. Every panel queries the `${datasource}` variable (never an `${DS_...}` import placeholder, which
file provisioning does not resolve), every rate/increase window is `$__rate_interval` or `$__range`, and the
run / concurrency / prompt-length / model / GPU variables narrow every query.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: loadgen beside this folder
from loadgen.engines.base import MetricRole as R  # noqa: E402
from loadgen.engines.sglang import ADAPTER as SGLANG  # noqa: E402

SERVER = {m.role: m.name for m in SGLANG.metrics}  # the server's metric names, by what loadgen reads them as

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39

# label matchers shared by the queries; a cell's run is the selected run or its drift check's control cell (run id
# `<run>-control`, which loadgen_run_info does not list)
RUN_CELLS = 'run=~"($run)(-control)?"'
CELL = RUN_CELLS + ', concurrency=~"$concurrency", context_tokens=~"$context_tokens"'
RUN = 'run=~"$run"'
MODEL = 'model_name=~"$model"'
GPU = 'instance=~"$instance", gpu=~"$gpu"'
CELL_BY = "run, concurrency, context_tokens, request_rate"
CELL_LEGEND = "{{run}} c={{concurrency}} ctx={{context_tokens}} {{request_rate}}"

TOK_S = "suffix: tok/s"
TOK_J = "suffix: tok/J"
TOKENS = "suffix: tok"

# ------------------------------------------------------------------------------------------ builders


def target(expr: str, legend: str = "", instant: bool = False, fmt: str = "time_series") -> dict:
    return {"datasource": DS, "editorMode": "code", "expr": expr, "format": fmt, "instant": instant,
            "legendFormat": legend, "range": not instant}


def _panel(kind: str, title: str, description: str, targets: list[dict], unit: str, w: int, h: int,
           options: dict, custom: dict | None = None, **defaults) -> dict:
    for ref, t in zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", targets):
        t["refId"] = ref
    field_defaults = {"unit": unit, **defaults}
    if custom is not None:
        field_defaults["custom"] = custom
    return {"type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"w": w, "h": h}, "targets": targets,
            "fieldConfig": {"defaults": field_defaults, "overrides": []}, "options": options}


def timeseries(title: str, description: str, targets: list[dict], unit: str, w: int = 12, h: int = 8,
               stack: bool = False, **defaults) -> dict:
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    options = {"legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                          "calcs": ["mean", "max", "lastNotNull"]},
               "tooltip": {"mode": "multi", "sort": "desc"}}
    return _panel("timeseries", title, description, targets, unit, w, h, options, custom, **defaults)


def stat(title: str, description: str, targets: list[dict], unit: str, w: int = 6, h: int = 4,
         text_mode: str = "auto", **defaults) -> dict:
    options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
               "textMode": text_mode}
    return _panel("stat", title, description, targets, unit, w, h, options, **defaults)


def bargauge(title: str, description: str, targets: list[dict], unit: str, w: int = 8, h: int = 8,
             **defaults) -> dict:
    options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True,
               "valueMode": "color", "namePlacement": "auto", "sizing": "auto", "minVizHeight": 16,
               "minVizWidth": 8}
    return _panel("bargauge", title, description, targets, unit, w, h, options, **defaults)


def heatmap(title: str, description: str, bucket_metric: str, matchers: str, unit: str, w: int = 12,
            h: int = 8) -> dict:
    expr = f"sum by (le) (increase({bucket_metric}{{{matchers}}}[$__rate_interval]))"
    options = {"calculate": False, "cellGap": 1, "yAxis": {"axisPlacement": "left", "unit": unit},
               "rowsFrame": {"layout": "auto"},
               "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5, "fill": "dark-orange",
                         "scale": "exponential", "steps": 64, "reverse": False},
               "filterValues": {"le": 1e-9}, "legend": {"show": True},
               "tooltip": {"mode": "single", "yHistogram": True, "showColorScale": False},
               "exemplars": {"color": "rgba(255,0,255,0.7)"}}
    return _panel("heatmap", title, description, [target(expr, "{{le}}", fmt="heatmap")], unit, w, h, options,
                  custom={"scaleDistribution": {"type": "linear"}})


def table(title: str, description: str, columns: list[tuple[str, str, str]], w: int = 24, h: int = 10,
          keep: tuple[str, ...] = ()) -> dict:
    """One instant query per (column name, expr, unit), merged on their labels into one row per series.

    `keep` names the label columns shown before the value columns (the others are hidden)."""
    targets = [target(expr, instant=True, fmt="table") for _, expr, _ in columns]
    panel = _panel("table", title, description, targets, "none", w, h,
                   {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"]}})
    refs = [t["refId"] for t in targets]
    rename = {f"Value #{ref}": name for ref, (name, _, _) in zip(refs, columns)}
    order = {name: i for i, name in enumerate([*keep, *rename])}  # organize orders by the original names
    panel["transformations"] = [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "job": True,
                                                         "instance": True},
                                       "indexByName": order, "renameByName": rename}}]
    panel["fieldConfig"]["overrides"] = [
        {"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": unit}]}
        for name, _, unit in columns]
    return panel


def barchart(title: str, description: str, expr: str, x: str, series: str, unit: str, w: int = 24,
             h: int = 9) -> dict:
    """Bars per `x` label value (one group per bar), one bar colour per `series` label value."""
    panel = _panel("barchart", title, description, [target(expr, instant=True, fmt="table")], unit, w, h,
                   {"xField": x, "orientation": "vertical", "showValue": "auto", "stacking": "none",
                    "groupWidth": 0.7, "barWidth": 0.9, "legend": {"showLegend": True, "displayMode": "list",
                                                                    "placement": "bottom"},
                    "tooltip": {"mode": "multi", "sort": "none"}, "xTickLabelRotation": 0},
                   min=0)
    panel["transformations"] = [{"id": "groupingToMatrix", "options": {"columnField": series, "rowField": x,
                                                                        "valueField": "Value"}},
                                {"id": "convertFieldType", "options": {"conversions": [
                                    {"targetField": f"{x}\\{series}", "destinationType": "string"}]}}]
    return panel


def last_cell(metric: str, agg: str = "sum") -> str:
    """A finished cell's gauge over the dashboard's range, summed over the shards of a sharded run."""
    return f"{agg} by ({CELL_BY}) (last_over_time({metric}{{{CELL}}}[$__range]))"


def cell_annotation() -> dict:
    """Each cell of the selected runs as a region: from its first to its last second with loadgen_cell_active 1."""
    return {"name": "Cells", "datasource": DS, "enable": True, "hide": False, "iconColor": "rgba(255, 152, 48, 1)",
            "expr": f"max by ({CELL_BY}) (loadgen_cell_active{{{CELL}}}) == 1", "step": "5s",
            "titleFormat": "cell c={{concurrency}} ctx={{context_tokens}} {{request_rate}}",
            "textFormat": "run {{run}}", "tagKeys": "run", "useValueForTime": False}


def row(title: str) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"w": 24, "h": 1}, "panels": []}


def quantiles(metric: str, matchers: str, qs=(0.5, 0.9, 0.99), by: str = "le") -> list[dict]:
    return [target(f"histogram_quantile({q}, sum by ({by}) (rate({metric}_bucket{{{matchers}}}[$__rate_interval])))",
                   f"p{round(q * 100)}") for q in qs]


def mean_of(metric: str, matchers: str, legend: str = "mean") -> dict:
    return target(f"sum(rate({metric}_sum{{{matchers}}}[$__rate_interval])) / "
                  f"sum(rate({metric}_count{{{matchers}}}[$__rate_interval]))", legend)


def thresholds(*steps: tuple[str, float | None]) -> dict:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def layout(panels: list[dict]) -> list[dict]:
    """Flow panels left to right in the 24-column grid, wrapping rows; assign ids and positions."""
    x = y = line_h = 0
    for pid, p in enumerate(panels, start=1):
        g = p["gridPos"]
        if p["type"] == "row" or x + g["w"] > 24:
            x, y = 0, y + line_h
            line_h = 0
        g["x"], g["y"] = x, y
        p["id"] = pid
        x += g["w"]
        line_h = max(line_h, g["h"])
        if p["type"] == "row":
            x, y, line_h = 0, y + 1, 0
    return panels


def datasource_variable() -> dict:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [], "refresh": 1,
            "regex": "", "skipUrlSync": False}


def query_variable(name: str, label: str, query: str, sort: int = 1) -> dict:
    """A multi-select label_values() variable, "All" by default; sort 1 = alphabetical, 3 = numerical."""
    return {"name": name, "label": label, "type": "query", "datasource": DS, "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "regex": "",
            "sort": sort, "hide": 0, "skipUrlSync": False}


CELL_VARIABLES = [
    query_variable("label", "Run label", "label_values(loadgen_run_info, label)"),
    query_variable("run", "Run", 'label_values(loadgen_run_info{label=~"$label"}, run)'),
    query_variable("concurrency", "Concurrency", f"label_values(loadgen_requests_total{{{RUN_CELLS}}}, concurrency)",
                   sort=3),
    query_variable("context_tokens", "Prompt tokens",
                   f"label_values(loadgen_requests_total{{{RUN_CELLS}}}, context_tokens)", sort=3),
]
MODEL_VARIABLE = query_variable("model", "Model", f"label_values({SERVER[R.REQUESTS]}, model_name)")
GPU_VARIABLES = [
    query_variable("instance", "GPU node", "label_values(DCGM_FI_DEV_POWER_USAGE, instance)"),
    query_variable("gpu", "GPU", 'label_values(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance"}, gpu)', sort=3),
]


def dashboard(uid: str, title: str, description: str, panels: list[dict], variables: list[dict]) -> dict:
    return {
        "uid": uid, "title": title, "description": description, "tags": ["loadgen", "llm"],
        "editable": False, "graphTooltip": 1, "refresh": "5s", "liveNow": False,
        "schemaVersion": SCHEMA_VERSION, "version": 1, "timezone": "browser", "fiscalYearStartMonth": 0,
        "weekStart": "", "time": {"from": "now-30m", "to": "now"}, "timepicker": {},
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}, cell_annotation()]},
        "links": [{"type": "dashboards", "tags": ["loadgen"], "asDropdown": False, "includeVars": True,
                   "keepTime": True, "title": "loadgen dashboards", "icon": "external link", "targetBlank": False,
                   "tooltip": "", "url": ""}],
        "templating": {"list": [datasource_variable(), *variables]},
        "panels": layout(panels),
    }


# ------------------------------------------------------------------------------------------ dashboards


def run_overview() -> dict:
    tokens = f"rate(loadgen_output_tokens_total{{{CELL}}}[$__rate_interval])"
    saturated_map = [{"type": "value", "options": {"0": {"text": "OK", "color": "green", "index": 0},
                                                   "1": {"text": "SATURATED", "color": "red", "index": 1}}}]
    panels = [
        row("Throughput"),
        stat("Output tokens/s (last seen)", "Aggregate output tokens per second of the selected cells over the "
             "last rate interval; after a run, the last value the run had.", [target(f"sum({tokens})")], TOK_S),
        stat("Requests in flight (last seen)", "Requests sent and not yet ended, over the selected runs.",
             [target(f"sum(loadgen_in_flight_requests{{{RUN}}})")], "short"),
        stat("Requests by outcome (time range)", "Requests ended over the dashboard's time range, by outcome.",
             [target(f"sum by (outcome) (increase(loadgen_requests_total{{{CELL}}}[$__range]))", "{{outcome}}",
                     instant=True)], "short"),
        stat("Any cell saturated", "1 when loadgen flagged a cell of the time range as saturated (event-loop lag "
             "p99 > 10 ms, CPU > 90 % or late sends): that cell's figures are invalid.",
             [target(f"max(last_over_time(loadgen_cell_client_saturated{{{CELL}}}[$__range]))", instant=True)],
             "none", mappings=saturated_map, thresholds=thresholds(("green", None), ("red", 1))),
        timeseries("Output tokens/s", "Aggregate output tokens per second per cell (client), next to the "
                   "server's own generation counter.",
                   [target(f"sum by ({CELL_BY}) ({tokens})", CELL_LEGEND),
                    target(f"sum by (model_name) (rate({SERVER[R.GENERATED_TOKENS]}{{{MODEL}}}[$__rate_interval]))",
                           "server {{model_name}}")], TOK_S, min=0),
        timeseries("Request rate by outcome", "Requests ended per second, by outcome.",
                   [target(f"sum by (outcome) (rate(loadgen_requests_total{{{CELL}}}[$__rate_interval]))",
                           "{{outcome}}")], "reqps", stack=True, min=0),
        bargauge("Output tokens/s per finished cell", "Aggregate output tokens/s of each finished cell of the time "
                 "range (the results JSON's output_tok_s; summed over the shards of a sharded run).",
                 [target(last_cell("loadgen_cell_output_tokens_per_second"), CELL_LEGEND, instant=True)],
                 TOK_S, w=24, min=0),
        row("Latency"),
        timeseries("TTFT p50 / p90 / p99", "Time to first token from the actual send (client), and the server's "
                   "p99 from its own histogram. Caveat: SGLang's first TTFT bucket is 0.1 s, so below 0.1 s the "
                   "server line reads ~0.099 s whatever the truth; the client histogram is 10 ms fine there.",
                   [*quantiles("loadgen_ttft_seconds", CELL),
                    target(f"histogram_quantile(0.99, sum by (le) (rate({SERVER[R.SERVER_TTFT]}_bucket"
                           f"{{{MODEL}}}[$__rate_interval])))", "server p99 (0.1 s resolution)")], "s", min=0),
        heatmap("TTFT distribution", "Requests per TTFT bucket and interval (client).", "loadgen_ttft_seconds_bucket",
                CELL, "s"),
        timeseries("Per-request output tokens/s", "Decode rate of each request, (completion_tokens-1) / "
                   "(last token - first token): p10 / p50 / p90.",
                   quantiles("loadgen_request_output_tokens_per_second", CELL, qs=(0.1, 0.5, 0.9)), TOK_S, min=0),
        timeseries("Inter-token latency", "Per-token latency: each chunk's gap spread over the tokens it carried "
                   "(speculative decoding sends several per chunk), with the server's own p99.",
                   [*quantiles("loadgen_itl_seconds", CELL), mean_of("loadgen_itl_seconds", CELL),
                    target(f"histogram_quantile(0.99, sum by (le) (rate({SERVER[R.SERVER_ITL]}_bucket"
                           f"{{{MODEL}}}[$__rate_interval])))", "server p99")], "s", min=0),
        timeseries("End-to-end latency", "Send to the end of the stream, ok requests (client), with the server's "
                   "own p99.",
                   [*quantiles("loadgen_e2e_latency_seconds", CELL),
                    target(f"histogram_quantile(0.99, sum by (le) (rate({SERVER[R.SERVER_E2E]}_bucket"
                           f"{{{MODEL}}}[$__rate_interval])))", "server p99")], "s", min=0),
        timeseries("Errors by outcome", "Failed requests per second by outcome (http_error, timeout, "
                   "connection_error, protocol_error, cancelled; not abandoned: closed on purpose).",
                   [target(f'sum by (outcome) (rate(loadgen_requests_total{{{CELL}, outcome!~"ok|abandoned"}}'
                           '[$__rate_interval]))',
                           "{{outcome}}")], "reqps", stack=True, min=0),
        row("Load"),
        timeseries("In flight vs target concurrency", "Requests in flight (client) against the cell's target "
                   "concurrency, with the server's running and queued requests.",
                   [target(f"sum by (run) (loadgen_in_flight_requests{{{RUN}}})", "in flight {{run}}"),
                    target(f"max by (run) (loadgen_target_concurrency{{{RUN}}})", "target {{run}}"),
                    target(f"sum by (model_name) ({SERVER[R.RUNNING]}{{{MODEL}}})", "server running"),
                    target(f"sum by (model_name) ({SERVER[R.QUEUED]}{{{MODEL}}})", "server queued")],
                   "short", min=0),
        timeseries("Client health", "Largest event-loop lag of the client per second and p99 send lateness; "
                   "both should stay in the low milliseconds.",
                   [target(f"max by (run) (loadgen_event_loop_lag_seconds{{{RUN}}})", "loop lag {{run}}"),
                    target("histogram_quantile(0.99, sum by (le) (rate(loadgen_send_lateness_seconds_bucket"
                           f"{{{CELL}}}[$__rate_interval])))", "send lateness p99")], "s", min=0),
        *slo_panels(),
        *verify_panels(),
        *search_panels(),
        *tune_panels(),
        *server_panels(),
    ]
    return dashboard("loadgen-run-overview", "loadgen / Run overview",
                     "Throughput, latency, errors and load of loadgen runs against an LLM server.", panels,
                     [*CELL_VARIABLES, MODEL_VARIABLE])


def slo_panels() -> list[dict]:
    """Latency targets (`loadgen --slo`): each cell's attainment against the target, and goodput."""
    good = f'rate(loadgen_slo_requests_total{{{CELL}, good="true"}}[$__rate_interval])'
    return [
        row("Latency targets (--slo)"),
        timeseries("SLO attainment", "Share of the cell's requests that succeeded and met every --slo target: "
                   "while the cell runs, of those ended so far; once it ended, of all it scheduled (the results' "
                   "slo.attainment). The line named target is --slo-attainment; the alert LoadgenSLOAttainmentBelowTarget "
                   "fires when a running cell stays below it.",
                   [target(f"max by ({CELL_BY}) (loadgen_slo_attainment{{{CELL}}})", CELL_LEGEND),
                    target(f"max by (run) (loadgen_slo_attainment_target{{{RUN}}})", "target {{run}}")],
                   "percentunit", min=0, max=1),
        timeseries("Goodput", "Requests per second that met every --slo target (good), by cell; output tok/s "
                   "that misses the targets does not count here.",
                   [target(f"sum by ({CELL_BY}) ({good})", CELL_LEGEND)], "reqps", min=0),
    ]


def verify_panels() -> list[dict]:
    """Output verification (`loadgen --verify`, docs/verify.md): per cell, the outputs checked so far, the
    share that is garbage (against the reference: the cell's judgement) and the share identical to it."""
    return [
        row("Output verification (--verify)"),
        timeseries("Garbage outputs", "Share of the cell's checked verification outputs that are garbage (repetition "
                   "loop, replacement characters, empty, cut short) where their reference output is not: above "
                   "--max-garbage-fraction the cell fails; the alert LoadgenGarbageOutput fires on any.",
                   [target(f"max by ({CELL_BY}) (loadgen_verify_garbage_ratio{{{CELL}}})", CELL_LEGEND)],
                   "percentunit", w=8, min=0, max=1),
        timeseries("Exact match", "Share of the cell's checked verification outputs identical to the reference "
                   "(greedy, one at a time); a divergence alone is a note, beside the server's own noise floor.",
                   [target(f"max by ({CELL_BY}) (loadgen_verify_exact_match_ratio{{{CELL}}})", CELL_LEGEND)],
                   "percentunit", w=8, min=0, max=1),
        bargauge("Verification outputs checked per cell", "Verification requests of each cell of the time range that "
                 "ended ok and were judged (the results' correctness.checked).",
                 [target(last_cell("loadgen_verify_checked_requests", "max"), CELL_LEGEND, instant=True)],
                 "short", w=8, min=0),
    ]


SEARCH_BY = "ctx, over"
SEARCH_LEGEND = "ctx={{ctx}} {{over}}"


def search_panels() -> list[dict]:
    """Where a capacity search stands (`loadgen search`, docs/search.md), per prompt length: the load probed now,
    the bracket (highest load met, lowest missed), the answer once given, the cells measured and the drift
    check. The gauges exist only while a search runs (and after it, until the exporter stops)."""
    drifted_map = [{"type": "value", "options": {"0": {"text": "no drift", "color": "green", "index": 0},
                                                 "1": {"text": "DRIFTED", "color": "red", "index": 1}}}]
    return [
        row("Capacity search (loadgen search)"),
        timeseries("Search probe and bracket", "The load the search probes now, the highest load that met the "
                   "SLO so far and the lowest that missed it (concurrency, or requests/s where over=rate); the "
                   "answer lies between met and missed, and the probe moves inside that bracket.",
                   [target(f"max by ({SEARCH_BY}) (loadgen_search_probe_load)", "probe " + SEARCH_LEGEND),
                    target(f"max by ({SEARCH_BY}) (loadgen_search_met_load)", "met " + SEARCH_LEGEND),
                    target(f"max by ({SEARCH_BY}) (loadgen_search_missed_load)", "missed " + SEARCH_LEGEND)],
                   "short", w=12, min=0),
        stat("Search answer", "The highest load that meets the SLO, per prompt length, once the search has "
             "answered; no value while it searches or when it gives no answer (a drifted server).",
             [target(f"max by ({SEARCH_BY}) (last_over_time(loadgen_search_answer[$__range]))", SEARCH_LEGEND,
                     instant=True)], "short", w=4),
        stat("Search cells measured", "Cells the search measured per prompt length: probes, their extensions, "
             "loads measured again and control probes.",
             [target(f"max by ({SEARCH_BY}) (last_over_time(loadgen_search_probes_measured[$__range]))",
                     SEARCH_LEGEND, instant=True)], "short", w=4),
        stat("Search drift check", "DRIFTED when the control probe, measured again, found the server slower or "
             "faster beyond noise: the search then gives no answer from the drifted probes.",
             [target(f"max by ({SEARCH_BY}) (last_over_time(loadgen_search_drifted[$__range]))", SEARCH_LEGEND,
                     instant=True)], "none", w=4, mappings=drifted_map,
             thresholds=thresholds(("green", None), ("red", 1))),
    ]


TUNE_BY = "tune, ctx, over, load"
TUNE_LOAD = "ctx={{ctx}} {{over}}={{load}}"


def tune_panels() -> list[dict]:
    """Where a tune stands (`loadgen tune`, docs/tune.md): the configuration measured now, each wanted load's leader
    and the state of its answer, and what the tune has spent beside the configurations found infeasible. The
    gauges exist while a visit's run serves its metrics (a restart between visits has none, as in a sweep)."""
    return [
        row("Configuration tune (loadgen tune)"),
        stat("Tune: measuring now", "The configuration the tune measures now and the visit's phase (first: every "
             "configuration once; end N: the control and the contenders of ties still open).",
             [target("max by (tune, config, phase) (loadgen_tune_visit)", "{{config}} ({{phase}})", instant=True)],
             "none", w=6),
        table("Tune: leader per load", "Each wanted load's leader now (the verdict over the feasible configurations "
              "measured so far, at the tune's resolution), its objective figure, and the state of the answer: wins, "
              "tied (within noise), open (a tie the end measures again), alone or none.",
              [("leader", f"max by ({TUNE_BY}, config) (last_over_time(loadgen_tune_leader[$__range]) == 1)",
                "none"),
               ("figure", f"max by ({TUNE_BY}) (last_over_time(loadgen_tune_leader_value[$__range]))", "short"),
               ("answer", f"max by ({TUNE_BY}, state) (last_over_time(loadgen_tune_answer[$__range]) == 1)",
                "none")],
              w=12, h=8, keep=("tune", "ctx", "over", "load", "config", "state")),
        stat("Tune: spent", "Cells (parts) measured, their measured requests and the restarts so far; "
             "tune.json's `grid` has what the full grid would cost.",
             [target("max by (tune) (last_over_time(loadgen_tune_cells_measured[$__range]))", "cells", instant=True),
              target("max by (tune) (last_over_time(loadgen_tune_requests_measured[$__range]))", "requests",
                     instant=True),
              target("max by (tune) (last_over_time(loadgen_tune_restarts[$__range]))", "restarts",
                     instant=True)], "short", w=6),
        table("Tune: infeasible configurations", "Configurations that did not come up or failed under load: never "
              "ranked, at any load (the reason and the diagnostics' tail are in tune.json and the console).",
              [("infeasible", "max by (tune, config) (last_over_time(loadgen_tune_infeasible[$__range]) == 1)",
                "none")],
              w=24, h=5, keep=("tune", "config")),
    ]


def server_panels() -> list[dict]:
    """What the SGLang server itself reports: KV cache, queueing, prefix cache."""
    return [
        row("Server (SGLang)"),
        timeseries("KV-cache usage", f"{SERVER[R.KV_USAGE]}: the share of the KV-cache pool in use; near 1 the "
                   "scheduler stops admitting requests and they queue.",
                   [target(f"max by (model_name) ({SERVER[R.KV_USAGE]}{{{MODEL}}})", "{{model_name}}")],
                   "percentunit", w=8, min=0, max=1),
        timeseries("Queue time", "Time a request waited in the scheduler's queue before it ran (server "
                   "histogram): p50 / p99.",
                   [target(f"histogram_quantile({q}, sum by (le) (rate({SERVER[R.QUEUE_TIME]}_bucket{{{MODEL}}}"
                           "[$__rate_interval])))", f"p{round(q * 100)}") for q in (0.5, 0.99)], "s", w=8, min=0),
        timeseries("Prefix cache hit rate", f"{SERVER[R.CACHE_HIT_RATE]}: the share of prompt tokens served from the "
                   "radix (prefix) cache.",
                   [target(f"avg by (model_name) ({SERVER[R.CACHE_HIT_RATE]}{{{MODEL}}})", "{{model_name}}")],
                   "percentunit", w=8, min=0, max=1),
    ]


def speculative_decoding() -> dict:
    server_ratio = (f"sum by (model_name) (rate({SERVER[R.GENERATED_TOKENS]}{{{MODEL}}}[$__rate_interval])) / "
                    f"sum by (model_name) (rate({SERVER[R.VERIFY_STEPS]}{{{MODEL}}}[$__rate_interval]))")
    client_ratio = (f"sum by ({CELL_BY}) (rate(loadgen_output_tokens_total{{{CELL}}}"
                    f"[$__rate_interval])) / sum by ({CELL_BY}) "
                    f"(rate(loadgen_chunks_total{{{CELL}}}[$__rate_interval]))")
    verify_rate = f"sum by (model_name) (rate({SERVER[R.VERIFY_STEPS]}{{{MODEL}}}[$__rate_interval]))"
    panels = [
        row("Accept length"),
        stat("Server accept length (last seen)", "Tokens generated per verify step over the last interval: "
             "Δgeneration_tokens_total / Δspec_verify_calls_total.", [target(server_ratio, "{{model_name}}")],
             "none", decimals=2),
        stat("Client tokens per chunk (time range)", "Output tokens per content chunk seen by the client over the "
             "dashboard's time range, an estimate of the accept length (one chunk per verify step when the server "
             "streams every step).",
             [target(f"sum(increase(loadgen_output_tokens_total{{{CELL}}}[$__range])) / "
                     f"sum(increase(loadgen_chunks_total{{{CELL}}}[$__range]))", instant=True)], "none", decimals=2),
        stat("Verify calls/s (last seen)", "Speculative verify steps per second on the server.",
             [target(verify_rate, "{{model_name}}")], "suffix: /s"),
        stat("Draft tokens per step", "The server's current speculative_num_draft_tokens setting.",
             [target(f"max by (model_name) ({SERVER[R.DRAFT_BUDGET]}{{{MODEL}}})", "{{model_name}}")],
             "none"),
        timeseries("Accept length: server vs client", "Server counters (Δgeneration tokens / Δverify calls), the "
                   "server's windowed spec_accept_length gauge, and the client's tokens per chunk per cell.",
                   [target(server_ratio, "server counters {{model_name}}"),
                    target(f"avg by (model_name) (avg_over_time({SERVER[R.ACCEPT_LENGTH]}{{{MODEL}}}"
                           "[$__rate_interval]))", "server gauge {{model_name}}"),
                    target(client_ratio, "client " + CELL_LEGEND)], "none", w=24, min=0, decimals=2),
        row("Verify steps"),
        timeseries("Verify calls per second", "Speculative verify steps per second (one forward of the target "
                   "model over the draft tree).", [target(verify_rate, "{{model_name}}")], "suffix: /s", min=0),
        timeseries("Verify steps per request", "Verify steps per finished request; with a fixed output length a "
                   "better drafter needs fewer.",
                   [target(f"{verify_rate} / sum by (model_name) (rate({SERVER[R.REQUESTS]}{{{MODEL}}}"
                           "[$__rate_interval]))", "{{model_name}}")], "short", min=0),
        timeseries("Generation throughput: gauge vs counter", "The scheduler's gen_throughput gauge against the "
                   "rate of the generation-token counter.",
                   [target(f"sum by (model_name) ({SERVER[R.THROUGHPUT]}{{{MODEL}}})", "gauge {{model_name}}"),
                    target(f"sum by (model_name) (rate({SERVER[R.GENERATED_TOKENS]}{{{MODEL}}}"
                           "[$__rate_interval]))", "counter {{model_name}}")], TOK_S, min=0),
        timeseries("Mean inter-token latency", "Mean per-token latency seen by the client: at the same verify "
                   "step time, a longer accept length lowers it.",
                   [mean_of("loadgen_itl_seconds", CELL, "mean ITL")], "s", min=0),
        row("Per cell"),
        bargauge("Accept length per finished cell", "loadgen's accept length for each finished cell of the time "
                 "range (best source: per-request data, counters, gauge, log, or tokens per chunk; see the results "
                 "JSON).", [target(last_cell("loadgen_accept_length", "max"), CELL_LEGEND, instant=True)],
                 "none", w=24, min=0, decimals=2),
    ]
    return dashboard("loadgen-spec-decoding", "loadgen / Speculative decoding",
                     "Accept length from the server (counters and gauge) and the client (tokens per chunk), "
                     "verify steps, and per-cell accept length.", panels, [MODEL_VARIABLE, *CELL_VARIABLES])


LIMIT = f"instance_gpu:gpu_power_limit_watts:best{{{GPU}}}"


def while_measuring(expr: str) -> str:
    """`expr` (one series) averaged over the seconds of the time range in which a selected cell ran."""
    return f"avg_over_time(({expr} and on () (max(loadgen_cell_active{{{RUN}}}) == 1))[$__range:])"


def gpu_power() -> dict:
    energy_w = f"sum(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[$__rate_interval])) / 1000"
    client_tok = f"sum(rate(loadgen_output_tokens_total{{{CELL}}}[$__rate_interval]))"
    server_tok = f"sum(rate({SERVER[R.GENERATED_TOKENS]}{{{MODEL}}}[$__rate_interval]))"
    panels = [
        row("Power"),
        stat("Total GPU power (last seen)", "Sum of DCGM_FI_DEV_POWER_USAGE over the selected GPUs.",
             [target(f"sum(DCGM_FI_DEV_POWER_USAGE{{{GPU}}})")], "watt"),
        stat("Power / limit, by limit source", "Total power as a fraction of the total power limit, labelled with "
             "where the limit came from: dcgm (scraped from dcgm-exporter), flag (loadgen --gpu-power-limit) or "
             "nvml (read by loadgen). Well below 1 under load means the GPUs wait on memory, not compute.",
             [target(f"sum(DCGM_FI_DEV_POWER_USAGE{{{GPU}}} and on (instance, gpu) {LIMIT}) / on () group_left "
                     f"(source) sum by (source) ({LIMIT})", "limit from {{source}}")],
             "percentunit", text_mode="value_and_name", thresholds=thresholds(("blue", None), ("green", 0.5), ("red", 0.95))),
        stat("GPU energy (time range)", "Energy used by the selected GPUs over the dashboard's time range, from "
             "the DCGM energy counter (mJ).",
             [target(f"sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[$__range])) / 1000",
                     instant=True)], "joule"),
        stat("Output tokens per joule (last seen)", "Client output tokens per joule of GPU energy, over the last "
             "interval.", [target(f"{client_tok} / (({energy_w}) > 0)")], TOK_J, decimals=2),
        timeseries("Power per GPU", "DCGM_FI_DEV_POWER_USAGE per GPU.",
                   [target(f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}}", "{{instance}} GPU {{gpu}}")], "watt", min=0),
        timeseries("Total power vs limit", "Per node: instantaneous power, mean power from the energy counter, "
                   "and the summed power limit with its source (dcgm, flag or nvml).",
                   [target(f"sum by (instance) (DCGM_FI_DEV_POWER_USAGE{{{GPU}}})", "power {{instance}}"),
                    target(f"sum by (instance) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}"
                           "[$__rate_interval])) / 1000", "from energy {{instance}}"),
                    target(f"sum by (instance, source) ({LIMIT})", "limit {{instance}} ({{source}})")],
                   "watt", min=0),
        timeseries("Power as a fraction of the limit", "Per GPU; the alert thresholds are 0.95 (near the limit) "
                   "and 0.5 under load (compute-idle).",
                   [target(f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}} / on (instance, gpu) group_left (source) {LIMIT}",
                           "{{instance}} GPU {{gpu}} ({{source}})")], "percentunit", min=0, max=1,
                   thresholds=thresholds(("blue", None), ("green", 0.5), ("red", 0.95))),
        timeseries("GPU utilisation", "DCGM_FI_DEV_GPU_UTIL: the share of time a kernel ran, not how busy the "
                   "SMs were.", [target(f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}}", "{{instance}} GPU {{gpu}}")],
                   "percent", min=0, max=100),
        *memory_bound_panels(),
        *bottleneck_panels(),
        row("Efficiency"),
        timeseries("Energy per output token", "Joules of GPU energy per output token, live, with the client's and "
                   "the server's token counts (no value while no tokens complete).",
                   [target(f"({energy_w}) / ({client_tok} > 0)", "client tokens"),
                    target(f"({energy_w}) / ({server_tok} > 0)", "server tokens")], "joule", min=0),
        timeseries("Output tokens per joule", "Output tokens per joule of GPU energy, live.",
                   [target(f"{client_tok} / (({energy_w}) > 0)", "client tokens"),
                    target(f"{server_tok} / (({energy_w}) > 0)", "server tokens")], TOK_J, min=0),
        bargauge("J per output token per finished cell", "loadgen's energy per output token for each finished "
                 "cell of the time range, from the energy counters over the cell's measured window.",
                 [target(last_cell("loadgen_energy_per_output_token_joules", "max"), CELL_LEGEND, instant=True)],
                 "joule", min=0),
        bargauge("Tokens per joule per finished cell", "loadgen's output tokens per joule for each finished cell "
                 "of the time range.",
                 [target(last_cell("loadgen_output_tokens_per_joule", "max"), CELL_LEGEND, instant=True)], TOK_J,
                 min=0),
        bargauge("Mean GPU power per finished cell", "loadgen's mean total GPU power over each finished cell of "
                 "the time range.",
                 [target(last_cell("loadgen_gpu_power_watts", "max"), CELL_LEGEND, instant=True)], "watt", min=0),
    ]
    return dashboard("loadgen-gpu-power", "loadgen / GPU power and efficiency",
                     "Per-GPU power from dcgm-exporter, power against the limit, whether the GPUs are memory-bound, "
                     "energy per output token and tokens per joule, live and per finished cell.", panels,
                     [*GPU_VARIABLES, *CELL_VARIABLES, MODEL_VARIABLE])


def memory_bound_panels() -> list[dict]:
    dram = while_measuring(f"avg(DCGM_FI_PROF_DRAM_ACTIVE{{{GPU}}})")
    tensor = while_measuring(f"avg(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{GPU}}})")
    verdict = [{"type": "value", "options": {"0": {"text": "no", "color": "green", "index": 0},
                                             "1": {"text": "YES: memory-bound", "color": "orange", "index": 1}}}]
    per_gpu = "{{instance}} GPU {{gpu}}"
    return [
        row("Is the GPU memory-bound?"),
        stat("Memory-bound?", "While the selected cells ran: YES when the memory interface was active more than "
             "half the cycles (DCGM_FI_PROF_DRAM_ACTIVE > 0.5) while the tensor pipes were active less than 30 % "
             "(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE < 0.3): decoding waits on HBM bandwidth, so a larger batch or "
             "draft budget is nearly free.", [target(f"({dram} > bool 0.5) * on () ({tensor} < bool 0.3)",
                                                      instant=True)],
             "none", mappings=verdict, thresholds=thresholds(("green", None), ("orange", 1))),
        stat("DRAM active while measuring", "Mean DCGM_FI_PROF_DRAM_ACTIVE over the selected GPUs during the "
             "seconds a selected cell ran.", [target(dram, instant=True)], "percentunit"),
        stat("Tensor pipe active while measuring", "Mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE over the selected GPUs "
             "during the seconds a selected cell ran.", [target(tensor, instant=True)], "percentunit"),
        stat("XID errors (time range)", "The largest XID error code any selected GPU reported in the time range "
             "(0 = none; DCGM blank values filtered).",
             [target(f"max(max_over_time((DCGM_FI_DEV_XID_ERRORS{{{GPU}}} < 1e18)[$__range:]))", instant=True)],
             "none", thresholds=thresholds(("green", None), ("red", 1))),
        timeseries("DRAM activity", "DCGM_FI_PROF_DRAM_ACTIVE per GPU: the share of cycles the memory interface "
                   "is busy.", [target(f"DCGM_FI_PROF_DRAM_ACTIVE{{{GPU}}}", per_gpu)], "percentunit", w=8,
                   min=0, max=1),
        timeseries("Tensor-pipe activity", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE per GPU: the share of cycles the "
                   "tensor (HMMA) pipes are busy.", [target(f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{GPU}}}", per_gpu)],
                   "percentunit", w=8, min=0, max=1),
        timeseries("SM clock", "DCGM_FI_DEV_SM_CLOCK per GPU; a clock below the board's maximum under load means "
                   "power or thermal capping.", [target(f"DCGM_FI_DEV_SM_CLOCK{{{GPU}}} * 1e6", per_gpu)], "hertz",
                   w=8, min=0),
        timeseries("Throttled time", "Share of each interval a GPU was throttled, by reason (power: "
                   "DCGM_FI_DEV_POWER_VIOLATION, thermal: DCGM_FI_DEV_THERMAL_VIOLATION; DCGM counts ns).",
                   [target(f"rate(DCGM_FI_DEV_POWER_VIOLATION{{{GPU}}}[$__rate_interval]) / 1e9",
                           "power " + per_gpu),
                    target(f"rate(DCGM_FI_DEV_THERMAL_VIOLATION{{{GPU}}}[$__rate_interval]) / 1e9",
                           "thermal " + per_gpu)], "percentunit", min=0, max=1),
        timeseries("XID errors", "DCGM_FI_DEV_XID_ERRORS per GPU: the last XID error code (0 = none).",
                   [target(f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}} < 1e18", per_gpu)], "none", min=0),
    ]


def bottleneck_panels() -> list[dict]:
    """Why is it slow: loadgen's verdict per finished cell (docs/bottleneck.md) and the live idle-GPU picture."""
    in_flight = f"sum(loadgen_in_flight_requests{{{RUN}}})"
    return [
        row("Why is it slow?"),
        table("Bottleneck per finished cell", "loadgen's verdict for each finished cell (loadgen_cell_bottleneck: "
              "client, server_host, gpu_power_cap, gpu_thermal, gpu_memory_bandwidth, gpu_compute, unknown) with "
              "the GPU figures behind it, time-weighted over the cell's window.",
              [("verdict", last_cell("loadgen_cell_bottleneck", "max"), "none"),
               ("GPU %", last_cell("loadgen_cell_gpu_utilization_percent", "max"), "percent"),
               ("SM clock / max", last_cell("loadgen_cell_gpu_sm_clock_per_max_ratio", "max"), "percentunit"),
               ("at power cap", last_cell("loadgen_cell_gpu_power_capped_ratio", "max"), "percentunit"),
               ("DRAM active", last_cell("loadgen_cell_gpu_dram_active_ratio", "max"), "percentunit"),
               ("tensor active", last_cell("loadgen_cell_gpu_tensor_active_ratio", "max"), "percentunit")],
              w=16, h=8, keep=("run", "context_tokens", "concurrency", "bottleneck")),
        bargauge("GPU utilization per finished cell", "loadgen's mean GPU utilization over each finished cell; "
                 "under 50 % with requests in flight, the server's host side limits throughput (server_host).",
                 [target(last_cell("loadgen_cell_gpu_utilization_percent", "max"), CELL_LEGEND, instant=True)],
                 "percent", w=8, min=0, max=100),
        timeseries("GPUs idle while requests wait", "Mean DCGM_FI_DEV_GPU_UTIL of the selected GPUs (%) beside "
                   "loadgen's requests in flight (a count): utilization near 0 while requests are in flight is "
                   "what the GPUsIdleWhileRequestsWait alert pages on.",
                   [target(f"avg by (instance) (DCGM_FI_DEV_GPU_UTIL{{{GPU}}})", "GPU % {{instance}}"),
                    target(in_flight, "requests in flight")], "short", min=0),
    ]


# the terminal matrix's columns (loadgen/results/table.py), from the exporter's finished-cell gauges
MATRIX_COLUMNS = [
    ("ok", "loadgen_cell_ok_requests", "short"), ("failed", "loadgen_cell_failed_requests", "short"),
    ("out tok/s", "loadgen_cell_output_tokens_per_second", TOK_S),
    ("req tok/s", "loadgen_cell_request_output_tokens_per_second_mean", TOK_S),
    ("req tok/s p10", "loadgen_cell_request_output_tokens_per_second_p10", TOK_S),
    ("TTFT mean", "loadgen_cell_ttft_mean_seconds", "s"), ("TTFT p50", "loadgen_cell_ttft_p50_seconds", "s"),
    ("TTFT p99", "loadgen_cell_ttft_p99_seconds", "s"),
    ("pp tok/s", "loadgen_cell_prefill_tokens_per_second", TOK_S), ("E2E mean", "loadgen_cell_e2e_mean_seconds", "s"),
    ("tok/chk", "loadgen_cell_output_tokens_per_chunk", "none"), ("accept", "loadgen_accept_length", "none"),
    ("W", "loadgen_gpu_power_watts", "watt"), ("J/tok", "loadgen_energy_per_output_token_joules", "joule"),
    ("GPU %", "loadgen_cell_gpu_utilization_percent", "percent"),
    ("saturated", "loadgen_cell_client_saturated", "none"),
]
SUMMED = {"loadgen_cell_ok_requests", "loadgen_cell_failed_requests", "loadgen_cell_output_tokens_per_second",
          "loadgen_gpu_power_watts"}  # what adds up over the shards of a sharded run; the rest take the max


def finished_cells() -> dict:
    columns = [(name, last_cell(metric, "sum" if metric in SUMMED else "max"), unit)
               for name, metric, unit in MATRIX_COLUMNS]
    info = (f"max by (run, label, model, engine, fingerprint, spec_algorithm, spec_budget, spec_topk, "
            f"spec_draft_tokens) (last_over_time(loadgen_run_info{{{RUN}}}[$__range]))")
    panels = [
        row("Runs"),
        table("Runs of the time range", "Each selected run's label, model, engine, server fingerprint and "
              "speculative settings (loadgen_run_info).", [("runs", info, "none")], h=6,
              keep=("run", "label", "model", "engine")),
        row("Cells"),
        table("Finished cells (the terminal matrix)", "One row per finished cell of the time range, with the "
              "columns of loadgen's terminal table; the values are the results JSON's (the exporter sets them "
              "from the cell's final summary), so they stay readable after loadgen has exited.", columns, h=12,
              keep=("run", "context_tokens", "concurrency", "request_rate")),
        barchart("Output tokens/s by concurrency", "Aggregate output tokens/s of the finished cells, one group per "
                 "concurrency and one bar per prompt length (open-loop cells: concurrency is their cap).",
                 f"max by (concurrency, context_tokens) ({last_cell('loadgen_cell_output_tokens_per_second')})",
                 "concurrency", "context_tokens", TOK_S),
        bargauge("TTFT p99 per finished cell", "p99 time to first token of each finished cell.",
                 [target(last_cell("loadgen_cell_ttft_p99_seconds", "max"), CELL_LEGEND, instant=True)], "s",
                 w=12, min=0),
        bargauge("Failed requests per finished cell", "Requests of each finished cell that ended in an error.",
                 [target(last_cell("loadgen_cell_failed_requests"), CELL_LEGEND, instant=True)], "short", w=12,
                 min=0),
    ]
    return dashboard("loadgen-finished-cells", "loadgen / Finished cells",
                     "What every finished cell measured, readable after the run: the terminal matrix, tok/s by "
                     "concurrency, and the runs' identities.", panels, CELL_VARIABLES)


DASHBOARDS = {
    "loadgen-run-overview.json": run_overview,
    "loadgen-spec-decoding.json": speculative_decoding,
    "loadgen-gpu-power.json": gpu_power,
    "loadgen-finished-cells.json": finished_cells,
}


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n" for name, build in DASHBOARDS.items()}


# ------------------------------------------------------------------------------------------ reading them back

def panel_queries(dash: dict) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query of every panel, rows' nested panels included."""
    out = []
    for p in dash["panels"]:
        for q in [p, *p.get("panels", [])]:
            out += [(q["title"], t["refId"], t["expr"]) for t in q.get("targets", [])]
    return out


VARIABLE_REF = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace Grafana variables ($x, ${x}, ${x:fmt}) as Grafana would before sending the query.

    Unknown names raise KeyError, so a typo in a variable cannot slip through.
    """
    return VARIABLE_REF.sub(lambda m: values[m.group(1) or m.group(2)], expr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only compare with the committed files")
    p.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default grafana/dashboards)")
    args = p.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("out of date (run python grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
