"""Which telemetry sources each cell samples, from `TelemetryConfig`: accept length from the server's
/metrics and from its log lines, power from DCGM or NVML. Sources that are not configured are still
reported, as unavailable with the reason; the ones the flags asked for are checked before the run
(`telemetry_checks.TelemetryPreflight`) and said to be lost when they stop measuring (`Required`). A new source: one adapter class in `loadgen/telemetry/`, one line
here."""

from __future__ import annotations

from loadgen.cli.telemetry_checks import Required
from loadgen.config import TelemetryConfig
from loadgen.console import log
from loadgen.names import ServerMetrics
from loadgen.run.cell import SourceFactory
from loadgen.target.discover import Target
from loadgen.telemetry.accept_log import AcceptLogSource, LogReader
from loadgen.telemetry.dcgm import DcgmSource
from loadgen.telemetry.nvml import NvmlSource
from loadgen.telemetry.server_metrics import ServerMetricsSource, Unavailable

NO_LOG = {"log": "no --accept-log-cmd given (e.g. --accept-log-cmd 'journalctl -f -u sglang.service -o cat')"}
METRICS_OFF = {"counters": "--server-metrics off", "gauge": "--server-metrics off"}


class LogCommand:
    """The run's `--accept-log-cmd`: started once the target is known (a failing command stops the run before
    any load) and terminated when the run ends, whatever the outcome."""

    def __init__(self, argv: list[str]):
        self.reader = LogReader(argv)

    async def start(self, target: Target) -> None:
        log(f"accept length: reading server log lines from {self.reader.command!r}")
        await self.reader.ensure_started()

    async def close(self, finished: bool) -> None:
        await self.reader.close()


class TelemetryPlan:
    """`plan(target)` → one factory per source; every cell gets new instances, so no state leaks between
    cells."""

    def __init__(self, cfg: TelemetryConfig):
        self.cfg = cfg
        self.log_command = LogCommand(cfg.accept_log_argv) if cfg.accept_log_argv else None

    def __call__(self, target: Target) -> list[SourceFactory]:
        return self.accept_length(target) + self.power()

    def accept_length(self, target: Target) -> list[SourceFactory]:
        interval, setting = self.cfg.telemetry_interval_s, self.cfg.server_metrics
        factories: list[SourceFactory]
        if setting == ServerMetrics.OFF:
            factories = [lambda: Unavailable("server_metrics", METRICS_OFF)]
        else:
            auto = setting == ServerMetrics.AUTO
            url, origin = (target.url + "/metrics", ServerMetrics.AUTO) if auto else (setting, "--server-metrics")
            if auto:
                factories = [lambda: ServerMetricsSource(url, interval_s=interval, origin=origin)]
            else:
                factories = [lambda: Required(ServerMetricsSource(url, interval_s=interval, origin=origin), origin)]
            log(f"accept length: scraping {url} every {interval:g} s")
        if self.log_command is not None:
            reader = self.log_command.reader
            factories.append(lambda: AcceptLogSource(reader))
        else:
            factories.append(lambda: Unavailable("accept_log", NO_LOG))
        return factories

    def power(self) -> list[SourceFactory]:
        interval = self.cfg.telemetry_interval_s
        if self.cfg.dcgm:
            urls = [u if u.rstrip("/").endswith("/metrics") else u.rstrip("/") + "/metrics" for u in self.cfg.dcgm]
            return [lambda: Required(DcgmSource(urls, interval_s=interval), "--dcgm")]
        if self.cfg.nvml:
            return [lambda: Required(NvmlSource(interval_s=interval), "--nvml")]
        return []
