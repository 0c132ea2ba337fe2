"""The flags of what is watched beside the load: telemetry sampled during each cell (`--server-metrics`,
`--accept-log-cmd`, `--dcgm`, `--nvml`) and the live Prometheus endpoint this run serves (`--metrics-port`,
`--gpu-power-limit`). Their own module because none of them changes a request; `observe_config` checks
them."""

from __future__ import annotations

import argparse

from loadgen.config import ExporterConfig, TelemetryConfig


def telemetry_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry (sampled during each cell, cut to its window)")
    g.add_argument("--server-metrics", default=TelemetryConfig.server_metrics, metavar="auto|off|URL",
                   help="server Prometheus /metrics for accept length and queue (default auto: the target's "
                        "/metrics if it answers)")
    g.add_argument("--accept-log-cmd", metavar="CMD",
                   help="command whose output carries SGLang 'Decode batch ... accept len: X' lines, e.g. "
                        "'journalctl -f -u sglang.service -o cat' (split like a shell, run without one)")
    g.add_argument("--dcgm", metavar="URL[,URL...]", help="dcgm-exporter /metrics URLs, one per node")
    g.add_argument("--nvml", action="store_true", help="read local GPU power through NVML (nvidia-ml-py)")
    g.add_argument("--telemetry-interval", type=float, default=TelemetryConfig.telemetry_interval_s, metavar="S",
                   help="sampling interval of every source in seconds (default %(default)g)")


def exporter_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live metrics (Prometheus; see docs/metrics.md and docs/observability.md)")
    g.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve live Prometheus metrics on http://HOST:PORT/metrics during the run (0 = a free "
                        "port, logged)")
    g.add_argument("--metrics-host", metavar="HOST",
                   help=f"address the metrics endpoint binds (default {ExporterConfig.metrics_host}; 0.0.0.0 for "
                        "all interfaces)")
    g.add_argument("--linger", type=float, metavar="S",
                   help=f"keep serving metrics S seconds after the run (default {ExporterConfig.metrics_linger_s:g}: "
                        "two 5 s scrape intervals)")


def power_limit_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("GPU power limit for the live metrics (see docs/observability.md)")
    g.add_argument("--gpu-power-limit", type=float, metavar="W",
                   help="power limit per GPU in W, exported as loadgen_gpu_power_limit_watts{source=\"flag\"} "
                        "for the power-vs-limit panels and alerts when dcgm-exporter does not export one (its "
                        "stock counters do not); default: the limit NVML or DCGM reported")
