"""Plug-in: the accept-length sources of every cell, from `--server-metrics` and `--accept-log-cmd`.

Checks both flags before any load is sent, makes one `ServerMetricsSource` per cell (or says why there is
none), shares one log command across the run's cells, and terminates that command when the run ends.
Sources that are not configured are still reported, as unavailable with the reason.
"""

from __future__ import annotations

from urllib.parse import urlparse

import loadgen.telemetry.options  # noqa: F401  (its configurer fills cfg.extras first)
from loadgen.cli import CONFIGURERS, RUNNER_HOOKS
from loadgen.errors import UsageError
from loadgen.telemetry.accept_log import AcceptLogSource, LogReader, split_command
from loadgen.telemetry.server_metrics import ServerMetricsSource, Unavailable
from loadgen.telemetry.sources import BUILDERS

_READERS: dict[int, LogReader] = {}  # id(RunConfig) → that run's log command, closed by the runner hook


def metrics_url(value: str) -> str:
    """`--server-metrics` URL: a base URL gets /metrics appended."""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--server-metrics {value!r}: give auto, off, or a URL such as "
                         "http://gpu-host:30000/metrics")
    return value.rstrip("/") + "/metrics" if parsed.path in ("", "/") else value


def configure(a, cfg) -> None:
    value = (a.server_metrics or "auto").strip()
    if value not in ("auto", "off"):
        value = metrics_url(value)
    cfg.extras["server_metrics"] = value
    if a.accept_log_cmd is not None:
        cfg.extras["accept_log_argv"] = split_command(a.accept_log_cmd)


def accept_length_sources(cfg, target) -> list:
    from loadgen.runner import log
    interval = cfg.extras.get("telemetry_interval_s", 1.0)
    setting = cfg.extras.get("server_metrics", "auto")
    factories = []
    if setting == "off":
        off = {"counters": "--server-metrics off", "gauge": "--server-metrics off"}
        factories.append(lambda: Unavailable("server_metrics", off))
    else:
        url, origin = (target.url + "/metrics", "auto") if setting == "auto" else (setting, "--server-metrics")
        factories.append(lambda: ServerMetricsSource(url, interval_s=interval, origin=origin))
        log(f"accept length: scraping {url} every {interval:g} s")
    argv = cfg.extras.get("accept_log_argv")
    if argv:
        reader = _READERS.setdefault(id(cfg), LogReader(argv))  # started by the setup hook, else by cell 1
        factories.append(lambda: AcceptLogSource(reader))
    else:
        none = {"log": "no --accept-log-cmd given (e.g. --accept-log-cmd 'journalctl -f -u sglang.service -o cat')"}
        factories.append(lambda: Unavailable("accept_log", none))
    return factories


def log_command_lifetime(runner) -> None:
    """Start the run's log command right after setup (a failing command stops the run before any load) and
    terminate it when the run ends, whatever the outcome."""
    setup, run = runner.setup, runner.run
    key = id(runner.cfg)

    async def setup_then_start(session) -> None:
        await setup(session)
        argv = runner.cfg.extras.get("accept_log_argv")
        if argv:
            from loadgen.runner import log
            reader = _READERS.setdefault(key, LogReader(argv))
            log(f"accept length: reading server log lines from {reader.command!r}")
            await reader.ensure_started()

    async def run_then_close() -> int:
        try:
            return await run()
        finally:
            reader = _READERS.pop(key, None)
            if reader is not None:
                await reader.close()

    runner.setup, runner.run = setup_then_start, run_then_close


CONFIGURERS.append(configure)
BUILDERS.append(accept_length_sources)
RUNNER_HOOKS.append(log_command_lifetime)
