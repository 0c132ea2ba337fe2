"""Telemetry the user asked for is there, or the run does not start: every explicitly requested source
(`--dcgm`, `--nvml`, `--server-metrics URL`) is tried once before discovery and any load, and a missing one
ends the run with one line naming the fix (exit 2). (`--accept-log-cmd` is started, and so checked, before
the first cell by its `LogCommand`.)

During the run, `Required` wraps each such source: when it is lost in a cell (it stopped answering, or its
samples failed), a warning line is printed at the cell's end and the cell's note says so.
"""

from __future__ import annotations

import aiohttp

from loadgen.config import TelemetryConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.names import ServerMetrics
from loadgen.telemetry.base import SourceResult, TelemetrySource
from loadgen.telemetry.dcgm import normalize_url
from loadgen.telemetry.dcgm_format import POWER, parse_dcgm
from loadgen.telemetry.nvml import nvml_available
from loadgen.telemetry.promtext import parse_text

CHECK_TIMEOUT_S = 5.0


async def _fetch(session: aiohttp.ClientSession, flag: str, url: str) -> str:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT_S)) as resp:
            text = await resp.text(errors="replace")
            status = resp.status
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise UsageError(f"{flag} {url}: cannot reach it ({type(exc).__name__}: {exc}"[:200]
                         + f"); check the address, or leave {flag} out") from None
    if status != 200:
        raise UsageError(f"{flag} {url} answered HTTP {status}; give the exporter's /metrics URL, or leave "
                         f"{flag} out")
    return text


async def check_dcgm(session: aiohttp.ClientSession, url: str) -> None:
    text = await _fetch(session, "--dcgm", url)
    readings = parse_dcgm(text).readings
    if not any(r.power_w is not None for r in readings):
        raise UsageError(f"--dcgm {url} does not look like dcgm-exporter (no {POWER} in its answer); give a "
                         "dcgm-exporter /metrics URL (port 9400 by default), or leave --dcgm out")
    if not any(r.activity for r in readings):  # said once here, not in every cell
        log(f"note: --dcgm {url} serves none of the GPU activity fields (DCGM_FI_DEV_GPU_UTIL, SM_CLOCK, "
            "CLOCKS_EVENT_REASONS, PROF_*): power only, no utilization, throttling or bottleneck verdict; add "
            "them to dcgm-exporter's counters CSV (-f; prometheus/dcgm-counters.csv has them)")


async def check_server_metrics(session: aiohttp.ClientSession, url: str) -> None:
    text = await _fetch(session, "--server-metrics", url)
    if not parse_text(text).samples:
        raise UsageError(f"--server-metrics {url} answered no Prometheus samples; give the server's /metrics "
                         "URL, or --server-metrics auto|off")


def check_nvml() -> None:
    ok, reason = nvml_available()
    if not ok:
        where = "" if "not installed" in reason else "; run on the GPU host"
        raise UsageError(f"--nvml: {reason}{where}; or read power from dcgm-exporter with --dcgm URL")


class TelemetryPreflight:
    """The runner's check, before discovery, of every source the flags asked for."""

    def __init__(self, cfg: TelemetryConfig):
        self.cfg = cfg

    async def check(self, session: aiohttp.ClientSession, url: str) -> None:
        if self.cfg.nvml:
            check_nvml()
        if not self.cfg.dcgm and self.cfg.server_metrics in (ServerMetrics.AUTO, ServerMetrics.OFF):
            return
        # a session of its own: the run's session carries the API key, which only the target may see
        async with aiohttp.ClientSession() as plain:
            for u in self.cfg.dcgm:
                await check_dcgm(plain, normalize_url(u))
            if self.cfg.server_metrics not in (ServerMetrics.AUTO, ServerMetrics.OFF):
                await check_server_metrics(plain, self.cfg.server_metrics)


def lost(result: SourceResult) -> str | None:
    """Why a requested source did not measure the whole cell, or None."""
    if not result.available:
        return result.reason or "unavailable"
    return "; ".join(result.losses) or None


class Required:
    """A requested source: its result as it is, plus a warning line and a note when it was lost."""

    def __init__(self, inner: TelemetrySource, flag: str):
        self.inner, self.flag = inner, flag
        self.name, self.kind = inner.name, inner.kind

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> SourceResult:
        result = await self.inner.stop()
        why = lost(result)
        if why is not None:
            result.lost = f"TELEMETRY LOST ({self.flag}): {why}"[:400]
            log(f"warning: {result.lost}")
        return result
