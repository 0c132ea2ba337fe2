"""Grafana dashboards for loadgen, generated from code.

    python grafana/generate.py          # rewrite grafana/dashboards/*.json
    python grafana/generate.py --check  # exit 1 when the committed files differ from this generator

Hand-written builders over plain dicts (no loadgen import, no Grafana SDK): what you read here is what the
JSON holds. Every panel queries the `${datasource}` variable (never an `${DS_...}` import placeholder, which
file provisioning does not resolve), every rate/increase window is `$__rate_interval` or `$__range`, and the
run / concurrency / prompt-length / model / GPU variables narrow every query.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39

# label matchers shared by the queries
CELL = 'run=~"$run", concurrency=~"$concurrency", context_tokens=~"$context_tokens"'
RUN = 'run=~"$run"'
MODEL = 'model_name=~"$model"'
GPU = 'instance=~"$instance", gpu=~"$gpu"'
CELL_LEGEND = "{{run}} c={{concurrency}} ctx={{context_tokens}}"

TOK_S = "suffix: tok/s"
TOK_J = "suffix: tok/J"
TOKENS = "suffix: tok"

# ------------------------------------------------------------------------------------------ builders


def target(expr: str, legend: str = "", instant: bool = False, fmt: str = "time_series") -> dict:
    return {"datasource": DS, "editorMode": "code", "expr": expr, "format": fmt, "instant": instant,
            "legendFormat": legend, "range": not instant}


def _panel(kind: str, title: str, description: str, targets: list[dict], unit: str, w: int, h: int,
           options: dict, custom: dict | None = None, **defaults) -> dict:
    for ref, t in zip("ABCDEFGH", targets):
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
         **defaults) -> dict:
    options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
               "textMode": "auto"}
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
    query_variable("run", "Run", "label_values(loadgen_requests_total, run)"),
    query_variable("concurrency", "Concurrency", 'label_values(loadgen_requests_total{run=~"$run"}, concurrency)',
                   sort=3),
    query_variable("context_tokens", "Prompt tokens",
                   'label_values(loadgen_requests_total{run=~"$run"}, context_tokens)', sort=3),
]
MODEL_VARIABLE = query_variable("model", "Model", "label_values(sglang:num_requests_total, model_name)")
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
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": [{"type": "dashboards", "tags": ["loadgen"], "asDropdown": False, "includeVars": True,
                   "keepTime": True, "title": "loadgen dashboards", "icon": "external link", "targetBlank": False,
                   "tooltip": "", "url": ""}],
        "templating": {"list": [datasource_variable(), *variables]},
        "panels": layout(panels),
    }


# ------------------------------------------------------------------------------------------ dashboards


def run_overview() -> dict:
    tokens = f"rate(loadgen_output_tokens_total{{{CELL}}}[$__rate_interval])"
    panels = [
        row("Throughput"),
        stat("Output tokens/s now", "Aggregate output tokens per second of the selected cells, counted from the "
             "server's usage figures of ok requests.", [target(f"sum({tokens})")], TOK_S),
        stat("Requests in flight", "Requests sent and not yet ended, over the selected runs.",
             [target(f"sum(loadgen_in_flight_requests{{{RUN}}})")], "short"),
        stat("Requests by outcome (time range)", "Requests ended over the dashboard's time range, by outcome.",
             [target(f"sum by (outcome) (increase(loadgen_requests_total{{{CELL}}}[$__range]))", "{{outcome}}")],
             "short"),
        stat("Client saturated", "1 when loadgen flagged its last cell as saturated (event-loop lag p99 > 10 ms, "
             "CPU > 90 % or late sends): that cell's figures are invalid.",
             [target(f"max(loadgen_client_saturated{{{RUN}}})")], "none",
             mappings=[{"type": "value", "options": {"0": {"text": "OK", "color": "green", "index": 0},
                                                     "1": {"text": "SATURATED", "color": "red", "index": 1}}}],
             thresholds=thresholds(("green", None), ("red", 1))),
        timeseries("Output tokens/s", "Aggregate output tokens per second per cell (client), next to the "
                   "server's own generation counter.",
                   [target(f"sum by (run, concurrency, context_tokens) ({tokens})", CELL_LEGEND),
                    target(f"sum by (model_name) (rate(sglang:generation_tokens_total{{{MODEL}}}[$__rate_interval]))",
                           "server {{model_name}}")], TOK_S, min=0),
        timeseries("Request rate by outcome", "Requests ended per second, by outcome.",
                   [target(f"sum by (outcome) (rate(loadgen_requests_total{{{CELL}}}[$__rate_interval]))",
                           "{{outcome}}")], "reqps", stack=True, min=0),
        row("Latency"),
        timeseries("TTFT p50 / p90 / p99", "Time to first token from the actual send (client), and the "
                   "server's p99 from its own histogram.",
                   [*quantiles("loadgen_ttft_seconds", CELL),
                    target("histogram_quantile(0.99, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket"
                           f"{{{MODEL}}}[$__rate_interval])))", "server p99")], "s", min=0),
        heatmap("TTFT distribution", "Requests per TTFT bucket and interval (client).", "loadgen_ttft_seconds_bucket",
                CELL, "s"),
        timeseries("Per-request output tokens/s", "Decode rate of each request, (completion_tokens-1) / "
                   "(last token - first token): p10 / p50 / p90.",
                   quantiles("loadgen_request_output_tokens_per_second", CELL, qs=(0.1, 0.5, 0.9)), TOK_S, min=0),
        timeseries("Inter-token latency", "Per-token latency: each chunk's gap spread over the tokens it carried "
                   "(speculative decoding sends several per chunk).",
                   [*quantiles("loadgen_itl_seconds", CELL), mean_of("loadgen_itl_seconds", CELL)], "s", min=0),
        timeseries("End-to-end latency", "Send to the end of the stream, ok requests.",
                   quantiles("loadgen_e2e_latency_seconds", CELL), "s", min=0),
        timeseries("Errors by outcome", "Failed requests per second by outcome (http_error, timeout, "
                   "connection_error, protocol_error, cancelled).",
                   [target(f'sum by (outcome) (rate(loadgen_requests_total{{{CELL}, outcome!="ok"}}[$__rate_interval]))',
                           "{{outcome}}")], "reqps", stack=True, min=0),
        row("Load"),
        timeseries("In flight vs target concurrency", "Requests in flight (client) against the cell's target "
                   "concurrency, with the server's running and queued requests.",
                   [target(f"sum by (run) (loadgen_in_flight_requests{{{RUN}}})", "in flight {{run}}"),
                    target(f"max by (run) (loadgen_target_concurrency{{{RUN}}})", "target {{run}}"),
                    target(f"sum by (model_name) (sglang:num_running_reqs{{{MODEL}}})", "server running"),
                    target(f"sum by (model_name) (sglang:num_queue_reqs{{{MODEL}}})", "server queued")],
                   "short", min=0),
        timeseries("Client health", "Largest event-loop lag of the client per second and p99 send lateness; "
                   "both should stay in the low milliseconds.",
                   [target(f"max by (run) (loadgen_event_loop_lag_seconds{{{RUN}}})", "loop lag {{run}}"),
                    target("histogram_quantile(0.99, sum by (le) (rate(loadgen_send_lateness_seconds_bucket"
                           f"{{{CELL}}}[$__rate_interval])))", "send lateness p99")], "s", min=0),
        bargauge("Output tokens/s per finished cell", "Aggregate output tokens/s of each finished cell "
                 "(the results JSON's output_tok_s; summed over the shards of a sharded run).",
                 [target(f"sum by (run, concurrency, context_tokens) "
                         f"(loadgen_cell_output_tokens_per_second{{{CELL}}})", CELL_LEGEND, instant=True)],
                 TOK_S, w=24, min=0),
    ]
    return dashboard("loadgen-run-overview", "loadgen / Run overview",
                     "Throughput, latency, errors and load of loadgen runs against an LLM server.", panels,
                     [*CELL_VARIABLES, MODEL_VARIABLE])


def speculative_decoding() -> dict:
    server_ratio = (f"sum by (model_name) (rate(sglang:generation_tokens_total{{{MODEL}}}[$__rate_interval])) / "
                    f"sum by (model_name) (rate(sglang:spec_verify_calls_total{{{MODEL}}}[$__rate_interval]))")
    client_ratio = (f"sum by (run, concurrency, context_tokens) (rate(loadgen_output_tokens_total{{{CELL}}}"
                    f"[$__rate_interval])) / sum by (run, concurrency, context_tokens) "
                    f"(rate(loadgen_chunks_total{{{CELL}}}[$__rate_interval]))")
    verify_rate = f"sum by (model_name) (rate(sglang:spec_verify_calls_total{{{MODEL}}}[$__rate_interval]))"
    panels = [
        row("Accept length"),
        stat("Server accept length", "Tokens generated per verify step over the last interval: "
             "Δgeneration_tokens_total / Δspec_verify_calls_total.", [target(server_ratio, "{{model_name}}")],
             "none", decimals=2),
        stat("Client tokens per chunk", "Output tokens per content chunk seen by the client, an estimate of the "
             "accept length (one chunk per verify step when the server streams every step).",
             [target(f"sum(rate(loadgen_output_tokens_total{{{CELL}}}[$__rate_interval])) / "
                     f"sum(rate(loadgen_chunks_total{{{CELL}}}[$__rate_interval]))")], "none", decimals=2),
        stat("Verify calls/s", "Speculative verify steps per second on the server.",
             [target(verify_rate, "{{model_name}}")], "suffix: /s"),
        stat("Draft tokens per step", "The server's current speculative_num_draft_tokens setting.",
             [target(f"max by (model_name) (sglang:spec_num_draft_tokens{{{MODEL}}})", "{{model_name}}")],
             "none"),
        timeseries("Accept length: server vs client", "Server counters (Δgeneration tokens / Δverify calls), the "
                   "server's windowed spec_accept_length gauge, and the client's tokens per chunk per cell.",
                   [target(server_ratio, "server counters {{model_name}}"),
                    target(f"avg by (model_name) (avg_over_time(sglang:spec_accept_length{{{MODEL}}}"
                           "[$__rate_interval]))", "server gauge {{model_name}}"),
                    target(client_ratio, "client " + CELL_LEGEND)], "none", w=24, min=0, decimals=2),
        row("Verify steps"),
        timeseries("Verify calls per second", "Speculative verify steps per second (one forward of the target "
                   "model over the draft tree).", [target(verify_rate, "{{model_name}}")], "suffix: /s", min=0),
        timeseries("Verify steps per request", "Verify steps per finished request; with a fixed output length a "
                   "better drafter needs fewer.",
                   [target(f"{verify_rate} / sum by (model_name) (rate(sglang:num_requests_total{{{MODEL}}}"
                           "[$__rate_interval]))", "{{model_name}}")], "short", min=0),
        timeseries("Generation throughput: gauge vs counter", "The scheduler's gen_throughput gauge against the "
                   "rate of the generation-token counter.",
                   [target(f"sum by (model_name) (sglang:gen_throughput{{{MODEL}}})", "gauge {{model_name}}"),
                    target(f"sum by (model_name) (rate(sglang:generation_tokens_total{{{MODEL}}}"
                           "[$__rate_interval]))", "counter {{model_name}}")], TOK_S, min=0),
        timeseries("Mean inter-token latency", "Mean per-token latency seen by the client: at the same verify "
                   "step time, a longer accept length lowers it.",
                   [mean_of("loadgen_itl_seconds", CELL, "mean ITL")], "s", min=0),
        row("Per cell"),
        bargauge("Accept length per finished cell", "loadgen's accept length for each finished cell (best source: "
                 "per-request data, counters, gauge, log, or tokens per chunk; see the results JSON).",
                 [target(f"max by (run, concurrency, context_tokens) (loadgen_accept_length{{{CELL}}})",
                         CELL_LEGEND, instant=True)], "none", w=24, min=0, decimals=2),
    ]
    return dashboard("loadgen-spec-decoding", "loadgen / Speculative decoding",
                     "Accept length from the server (counters and gauge) and the client (tokens per chunk), "
                     "verify steps, and per-cell accept length.", panels, [MODEL_VARIABLE, *CELL_VARIABLES])


def gpu_power() -> dict:
    limit = (f"(DCGM_FI_DEV_POWER_MGMT_LIMIT{{{GPU}}} > 0 < 1e6 or "
             f"DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{{GPU}}} > 0 < 1e6)")
    energy_w = f"sum(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[$__rate_interval])) / 1000"
    client_tok = f"sum(rate(loadgen_output_tokens_total{{{CELL}}}[$__rate_interval]))"
    server_tok = f"sum(rate(sglang:generation_tokens_total{{{MODEL}}}[$__rate_interval]))"
    panels = [
        row("Power"),
        stat("Total GPU power", "Sum of DCGM_FI_DEV_POWER_USAGE over the selected GPUs.",
             [target(f"sum(DCGM_FI_DEV_POWER_USAGE{{{GPU}}})")], "watt"),
        stat("Power / limit", "Total power as a fraction of the total power-management limit: well below 1 "
             "under load means the GPUs wait on memory, not compute.",
             [target(f"sum(DCGM_FI_DEV_POWER_USAGE{{{GPU}}} and on (instance, gpu) {limit}) / sum({limit})")],
             "percentunit", thresholds=thresholds(("blue", None), ("green", 0.5), ("red", 0.95))),
        stat("GPU energy (time range)", "Energy used by the selected GPUs over the dashboard's time range, from "
             "the DCGM energy counter (mJ).",
             [target(f"sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[$__range])) / 1000")], "joule"),
        stat("Output tokens per joule now", "Client output tokens per joule of GPU energy, over the last interval.",
             [target(f"{client_tok} / ({energy_w})")], TOK_J, decimals=2),
        timeseries("Power per GPU", "DCGM_FI_DEV_POWER_USAGE per GPU.",
                   [target(f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}}", "{{instance}} GPU {{gpu}}")], "watt", min=0),
        timeseries("Total power vs limit", "Per node: instantaneous power, mean power from the energy counter, "
                   "and the summed power limit.",
                   [target(f"sum by (instance) (DCGM_FI_DEV_POWER_USAGE{{{GPU}}})", "power {{instance}}"),
                    target(f"sum by (instance) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}"
                           "[$__rate_interval])) / 1000", "from energy {{instance}}"),
                    target(f"sum by (instance) {limit}", "limit {{instance}}")], "watt", min=0),
        timeseries("Power as a fraction of the limit", "Per GPU; the alert thresholds are 0.95 (near the limit) "
                   "and 0.5 under load (compute-idle).",
                   [target(f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}} / on (instance, gpu) {limit}",
                           "{{instance}} GPU {{gpu}}")], "percentunit", min=0, max=1,
                   thresholds=thresholds(("blue", None), ("green", 0.5), ("red", 0.95))),
        timeseries("GPU utilisation", "DCGM_FI_DEV_GPU_UTIL: the share of time a kernel ran, not how busy the "
                   "SMs were.", [target(f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}}", "{{instance}} GPU {{gpu}}")],
                   "percent", min=0, max=100),
        row("Efficiency"),
        timeseries("Energy per output token", "Joules of GPU energy per output token, live, with the client's and "
                   "the server's token counts.",
                   [target(f"({energy_w}) / {client_tok}", "client tokens"),
                    target(f"({energy_w}) / {server_tok}", "server tokens")], "joule", min=0),
        timeseries("Output tokens per joule", "Output tokens per joule of GPU energy, live.",
                   [target(f"{client_tok} / ({energy_w})", "client tokens"),
                    target(f"{server_tok} / ({energy_w})", "server tokens")], TOK_J, min=0),
        bargauge("J per output token per finished cell", "loadgen's energy per output token for each finished "
                 "cell, from the energy counters over the cell's measured window.",
                 [target(f"max by (run, concurrency, context_tokens) "
                         f"(loadgen_energy_per_output_token_joules{{{CELL}}})", CELL_LEGEND, instant=True)],
                 "joule", min=0),
        bargauge("Tokens per joule per finished cell", "loadgen's output tokens per joule for each finished cell.",
                 [target(f"max by (run, concurrency, context_tokens) (loadgen_output_tokens_per_joule{{{CELL}}})",
                         CELL_LEGEND, instant=True)], TOK_J, min=0),
        bargauge("Mean GPU power per finished cell", "loadgen's mean total GPU power over each finished cell.",
                 [target(f"max by (run, concurrency, context_tokens) (loadgen_gpu_power_watts{{{CELL}}})",
                         CELL_LEGEND, instant=True)], "watt", min=0),
    ]
    return dashboard("loadgen-gpu-power", "loadgen / GPU power and efficiency",
                     "Per-GPU power from dcgm-exporter, power against the limit, energy per output token and "
                     "tokens per joule, live and per finished cell.", panels,
                     [*GPU_VARIABLES, *CELL_VARIABLES, MODEL_VARIABLE])


DASHBOARDS = {
    "loadgen-run-overview.json": run_overview,
    "loadgen-spec-decoding.json": speculative_decoding,
    "loadgen-gpu-power.json": gpu_power,
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
