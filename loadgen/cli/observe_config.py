"""What is watched beside the load, checked: the telemetry flags to a `TelemetryConfig` and the live
metrics flags to an `ExporterConfig` (exit 2 on a bad URL, port or limit). Its own module because neither
changes a request (the flags are `observe_options`); whether a requested source answers is checked later,
by `telemetry_checks`."""

from __future__ import annotations

import argparse
from urllib.parse import urlparse

from loadgen.config import ExporterConfig, TelemetryConfig
from loadgen.errors import UsageError
from loadgen.names import ServerMetrics
from loadgen.telemetry.accept_log import split_command


def metrics_url(value: str) -> str:
    """`--server-metrics` URL: a base URL gets /metrics appended."""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--server-metrics {value!r}: give auto, off, or a URL such as "
                         "http://gpu-host:30000/metrics")
    return value.rstrip("/") + "/metrics" if parsed.path in ("", "/") else value


def telemetry_config(a: argparse.Namespace) -> TelemetryConfig:
    if a.telemetry_interval <= 0:
        raise UsageError(f"--telemetry-interval: {a.telemetry_interval} must be > 0")
    dcgm = [u.strip() for u in a.dcgm.split(",")] if a.dcgm else []
    for u in dcgm:
        if not u.startswith(("http://", "https://")):
            raise UsageError(f"--dcgm {u!r} needs a scheme and host, e.g. http://gpu-node-1:9400/metrics")
    server_metrics = (a.server_metrics or ServerMetrics.AUTO).strip()
    if server_metrics not in (ServerMetrics.AUTO, ServerMetrics.OFF):
        server_metrics = metrics_url(server_metrics)
    argv = split_command(a.accept_log_cmd) if a.accept_log_cmd is not None else None
    return TelemetryConfig(server_metrics=server_metrics, accept_log_cmd=a.accept_log_cmd, accept_log_argv=argv,
                           dcgm=dcgm, nvml=a.nvml, telemetry_interval_s=a.telemetry_interval)


def exporter_config(a: argparse.Namespace) -> ExporterConfig:
    port, host, linger = a.metrics_port, a.metrics_host, a.linger
    limit = getattr(a, "gpu_power_limit", None)
    if limit is not None and not (0 < limit < 1e5):
        raise UsageError(f"--gpu-power-limit {limit:g}: give the power limit per GPU in W, e.g. 700")
    if port is None:
        if host is not None or linger is not None or limit is not None:
            raise UsageError("--metrics-host, --linger and --gpu-power-limit need --metrics-port")
        return ExporterConfig()
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port {port}: a port is 0-65535 (0 = a free one)")
    if linger is not None and linger < 0:
        raise UsageError(f"--linger {linger:g}: must be >= 0 seconds")
    d = ExporterConfig()
    return ExporterConfig(metrics_port=port, metrics_host=host or d.metrics_host,
                          metrics_linger_s=d.metrics_linger_s if linger is None else linger,
                          gpu_power_limit_w=limit)
