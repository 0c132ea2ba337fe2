"""The live exporter's lifetime around a run: it is one of the run's sinks, serves from setup to the end,
and keeps serving `--linger` seconds after a finished run so Prometheus scrapes the last values (an
interrupted or crashed run stops at once)."""

from __future__ import annotations

from exporters.live import LiveExporter
from loadgen.config import ExporterConfig, SloConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.target.discover import Target


class ExporterService:
    def __init__(self, exporter: LiveExporter, cfg: ExporterConfig):
        self.exporter = exporter
        self.cfg = cfg

    async def start(self, target: Target | None = None) -> None:
        try:
            await self.exporter.start()
        except OSError as exc:
            raise UsageError(f"--metrics-port {self.cfg.metrics_port}: cannot listen on "
                             f"{self.cfg.metrics_host}:{self.cfg.metrics_port}: {exc.strerror or exc}; "
                             "pick another port") from None
        if target is not None:
            self.exporter.describe_target(target.as_dict())
        log(f"live metrics on http://{self.exporter.host}:{self.exporter.port}/metrics")

    async def close(self, finished: bool) -> None:
        if not finished:  # nobody waits for a last scrape
            self.exporter.linger_s = 0
        await self.exporter.aclose()


def live_exporter(run_id: str, cfg: ExporterConfig, label: str | None = None,
                  slo: SloConfig | None = None) -> tuple[LiveExporter, ExporterService] | None:
    """The exporter (a sink) and its lifetime (a service), or None without --metrics-port. `label` (--label)
    goes on loadgen_run_info; with latency targets (`slo`) it serves the SLO metrics too."""
    if cfg.metrics_port is None:
        return None
    exporter = LiveExporter(run_id, host=cfg.metrics_host, port=cfg.metrics_port, linger_s=cfg.metrics_linger_s,
                            label=label, gpu_power_limit_w=cfg.gpu_power_limit_w, slo=slo)
    return exporter, ExporterService(exporter, cfg)
