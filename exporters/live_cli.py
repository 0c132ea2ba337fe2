"""`--metrics-port`, `--metrics-host`, `--linger`: the live exporter as a CLI plug-in.

Importing this module registers the flags and a runner hook with loadgen's CLI (add "exporters.live_cli" to
`loadgen.cli.PLUGINS`). The hook adds a `LiveExporter` to the run's sinks, starts serving before the run's
setup, and after the run keeps serving `--linger` seconds (default two 5 s scrape intervals) so Prometheus
scrapes the last values; an interrupted run stops at once instead.
"""

from __future__ import annotations

import argparse

from exporters.live import LiveExporter
from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
from loadgen.errors import UsageError

DEFAULT_LINGER_S = 10.0


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live metrics (Prometheus; see docs/metrics.md and docs/observability.md)")
    g.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve live Prometheus metrics on http://HOST:PORT/metrics during the run (0 = a free "
                        "port, logged)")
    g.add_argument("--metrics-host", metavar="HOST",
                   help="address the metrics endpoint binds (default 127.0.0.1; 0.0.0.0 for all interfaces)")
    g.add_argument("--linger", type=float, metavar="S",
                   help=f"keep serving metrics S seconds after the run (default {DEFAULT_LINGER_S:g}: two 5 s "
                        "scrape intervals)")


def configure(a: argparse.Namespace, cfg) -> None:
    port, host, linger = a.metrics_port, a.metrics_host, a.linger
    if port is None:
        if host is not None or linger is not None:
            raise UsageError("--metrics-host and --linger need --metrics-port")
        return
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port {port}: a port is 0-65535 (0 = a free one)")
    if linger is not None and linger < 0:
        raise UsageError(f"--linger {linger:g}: must be >= 0 seconds")
    cfg.extras.update(metrics_port=port, metrics_host=host or "127.0.0.1",
                      metrics_linger_s=DEFAULT_LINGER_S if linger is None else linger)


def install(runner) -> None:
    """Serve the run's live metrics for the whole run, and `--linger` seconds after it."""
    extras = runner.cfg.extras
    if extras.get("metrics_port") is None:
        return
    exporter = LiveExporter(runner.run_id, host=extras["metrics_host"], port=extras["metrics_port"],
                            linger_s=extras["metrics_linger_s"])
    runner.sinks.append(exporter)
    run = runner.run

    async def run_with_exporter() -> int:
        from loadgen.runner import log
        try:
            await exporter.start()
        except OSError as exc:
            raise UsageError(f"--metrics-port {extras['metrics_port']}: cannot listen on "
                             f"{extras['metrics_host']}:{extras['metrics_port']}: {exc.strerror or exc}; "
                             "pick another port") from None
        log(f"live metrics on http://{exporter.host}:{exporter.port}/metrics")
        rc = None
        try:
            rc = await run()
            return rc
        finally:
            if rc is None or rc >= 128:  # crashed or interrupted: nobody waits for a last scrape
                exporter.linger_s = 0
            await exporter.aclose()

    runner.run = run_with_exporter


OPTION_GROUPS.append(add_options)
CONFIGURERS.append(configure)
RUNNER_HOOKS.append(install)
