"""NVML power exporter in dcgm-exporter's names, for boxes where dcgm-exporter cannot run.

    python -m exporters.nvml [--port 9400] [--host 127.0.0.1] [--interval 1]

Serves GET /metrics with `DCGM_FI_DEV_POWER_USAGE` (W), `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ counter),
`DCGM_FI_DEV_POWER_MGMT_LIMIT` / `DCGM_FI_DEV_ENFORCED_POWER_LIMIT` (W), `DCGM_FI_DEV_GPU_UTIL` (%) and,
where NVML gives them, SM clock, temperature and framebuffer use, labelled like dcgm-exporter (`gpu`, `UUID`,
`pci_bus_id`, `device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`), so the same Prometheus scrape
config, dashboards and `loadgen --dcgm URL` work unchanged. Like dcgm-exporter it collects every
`--interval` seconds and serves the last collection. Bound to 127.0.0.1 unless `--host` says otherwise.
Exit status 2, with a one-line reason, when NVML is unavailable (no nvidia-ml-py, no driver, no GPU).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

from aiohttp import web

from loadgen.aio import cancel_and_wait
from loadgen.telemetry.nvml import dcgm_text, load_nvml, nvml_available, open_devices


class NvmlCollector:
    """Reads NVML every `interval_s` in a worker thread and keeps the latest exposition text."""

    def __init__(self, nvml: Any, interval_s: float = 1.0, hostname: str | None = None):
        self.nvml = nvml
        self.interval_s = interval_s
        self.hostname = hostname or socket.gethostname()
        self.devices: list = []
        self.driver_version = ""
        self.text = ""

    def _open(self) -> None:
        self.nvml.nvmlInit()
        self.devices = open_devices(self.nvml)
        try:
            self.driver_version = str(self.nvml.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 - any NVML error: the label is then empty
            self.driver_version = ""

    async def collect(self) -> None:
        self.text = await asyncio.to_thread(dcgm_text, self.nvml, self.devices, self.hostname,
                                            self.driver_version)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.collect()

    async def lifetime(self, app: web.Application):
        """aiohttp cleanup context: NVML open and collecting while the app serves."""
        await asyncio.to_thread(self._open)
        await self.collect()  # the first scrape already has data
        task = asyncio.create_task(self._loop())
        yield
        await cancel_and_wait(task)
        await asyncio.to_thread(self.nvml.nvmlShutdown)


def build_app(nvml: Any, interval_s: float = 1.0, hostname: str | None = None) -> web.Application:
    collector = NvmlCollector(nvml, interval_s, hostname)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=collector.text, content_type="text/plain")

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="OK\n")

    app = web.Application()
    app.cleanup_ctx.append(collector.lifetime)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    return app


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m exporters.nvml", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=9400, help="port to serve /metrics on (default 9400)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between NVML collections (default 1)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, nvml: Any = None) -> int:
    args = parse_args(argv)
    if nvml is None:
        try:
            nvml = load_nvml()
        except ImportError:
            nvml = None
    ok, reason = nvml_available(nvml)
    if not ok:
        print(f"exporters.nvml: {reason}", file=sys.stderr)
        return 2
    print(f"exporters.nvml: {reason}; serving http://{args.host}:{args.port}/metrics "
          f"(collect every {args.interval:g} s)", file=sys.stderr, flush=True)
    web.run_app(build_app(nvml, args.interval), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
