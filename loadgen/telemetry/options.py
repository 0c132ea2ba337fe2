"""Command-line flags of the telemetry sources, and the builders that turn them into per-cell sources."""

from __future__ import annotations

import argparse

from loadgen.cli import CONFIGURERS, OPTION_GROUPS
from loadgen.config import parse_float_list  # noqa: F401  (kept for adapters that take lists)
from loadgen.errors import UsageError
from loadgen.telemetry.sources import BUILDERS


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry (sampled during each cell, cut to its window)")
    g.add_argument("--server-metrics", default="auto", metavar="auto|off|URL",
                   help="server Prometheus /metrics for accept length and queue (default auto: the target's "
                        "/metrics if it answers)")
    g.add_argument("--accept-log-cmd", metavar="CMD",
                   help="command whose output carries SGLang 'Decode batch ... accept len: X' lines, e.g. "
                        "'journalctl -f -u sglang.service -o cat' (split like a shell, run without one)")
    g.add_argument("--dcgm", metavar="URL[,URL...]", help="dcgm-exporter /metrics URLs, one per node")
    g.add_argument("--nvml", action="store_true", help="read local GPU power through NVML (nvidia-ml-py)")
    g.add_argument("--telemetry-interval", type=float, default=1.0, metavar="S",
                   help="sampling interval of every source in seconds (default 1)")


def configure(a: argparse.Namespace, cfg) -> None:
    if a.telemetry_interval <= 0:
        raise UsageError(f"--telemetry-interval: {a.telemetry_interval} must be > 0")
    dcgm = [u.strip() for u in a.dcgm.split(",")] if a.dcgm else []
    for u in dcgm:
        if not u.startswith(("http://", "https://")):
            raise UsageError(f"--dcgm {u!r} needs a scheme and host, e.g. http://gpu-node-1:9400/metrics")
    cfg.extras.update(server_metrics=a.server_metrics, accept_log_cmd=a.accept_log_cmd, dcgm=dcgm,
                      nvml=a.nvml, telemetry_interval_s=a.telemetry_interval)


def power_sources(cfg, target) -> list:
    interval = cfg.extras.get("telemetry_interval_s", 1.0)
    out = []
    if cfg.extras.get("dcgm"):
        from loadgen.telemetry.dcgm import DcgmSource
        urls = [u if u.rstrip("/").endswith("/metrics") else u.rstrip("/") + "/metrics" for u in cfg.extras["dcgm"]]
        out.append(lambda: DcgmSource(urls, interval_s=interval))
    elif cfg.extras.get("nvml"):
        from loadgen.telemetry.nvml import NvmlSource
        out.append(lambda: NvmlSource(interval_s=interval))
    return out


OPTION_GROUPS.append(add_options)
CONFIGURERS.append(configure)
BUILDERS.append(power_sources)
