"""A simulated GPU set whose power follows the simulator's load, served like NVIDIA dcgm-exporter.

API (used by the simulator; keep it stable):

    gpus = SimulatedGpus(n=8, idle_w=120.0, load_w=450.0, limit_w=1100.0,
                         model="NVIDIA B300 (simulated)", hostname="sim-node-0")
    gpus.set_utilization(u, t_ns=None)   # u in [0, 1]; call whenever the engine's batch changes
    gpus.power_w(gpu)                    # W now: idle_w + (load_w - idle_w) * u + a small per-GPU offset
    gpus.energy_mj(gpu, t_ns=None)       # exact ∫ power dt since construction (mJ): the test truth
    gpus.counter_mj(gpu, t_ns=None)      # what the exported counter shows (restarts at 0 on reset_counter)
    gpus.render_metrics(t_ns=None)       # dcgm-exporter exposition text
    app = gpus.make_app()                # aiohttp app: GET /metrics, GET /health
    gpus.stop_answering(mode="hang")     # faults: "hang" (never answers), "close" (drops the connection),
    gpus.resume_answering()              #   "error" (HTTP 503)
    gpus.reset_counter(gpu=None)         # the energy counter restarts at 0 (all GPUs, or one)
    gpus.nvml()                          # a pynvml-like module over these GPUs (for NVML code paths)

Options: `collect_interval_s` > 0 serves values refreshed only that often, like dcgm-exporter `-c` (by a
timer with `collect_on_timer`; exact energy of past windows at GET /truth/energy: `sim.energy_truth`)
(its default 30 s makes short cells meaningless); `export_energy=False` leaves out the energy counter and
`export_limit=False` the power limit, as dcgm-exporter's default CSV does; `hostname_label="hostname"`
mimics exporter builds after 4.5.3-4.8.2; `busy_fraction` < 1 makes the GPUs busy only that share of the
engine's load (a host-bound server). Utilization, profiling ratios, SM clock and clock-event reasons follow
the busy fraction; a load whose power would pass `limit_w` is held at the limit and throttled (`gpu_profile`).

Power is piecewise constant between `set_utilization` calls, so energy is exact: each GPU's
E(t) = (idle_w + offset) · (t − t0) + (load_w − idle_w) · ∫u dt, kept as one running integral of u, so a
call costs O(1) whatever the call rate. Times are `time.monotonic_ns()` readings (the clock every loadgen
record uses); a time earlier than the last change is taken as that change's time. Defaults follow
DESIGN.md §8: GPUs under load drew ~450 W of a 1100 W limit; ~120 W idle.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time

from aiohttp import web

from loadgen.sim.energy_truth import EnergyHistory, timer_collector, truth_route
from loadgen.sim.gpu_nvml import SimulatedNvml
from loadgen.sim.gpu_profile import FB_USED_MIB, GpuProfile
from loadgen.telemetry.dcgm_format import ENERGY, MGMT_LIMIT, POWER, dcgm_labels, render_dcgm

_OFFSETS_W = (-3.0, 2.0, 0.0, -2.0, 3.0, 1.0, -1.0, 2.5)  # fixed per-GPU spread, as real boards differ
__all__ = ["SimulatedGpus", "SimulatedNvml"]


class SimulatedGpus:
    """See the module docstring for the API."""

    def __init__(self, n: int = 8, idle_w: float = 120.0, load_w: float = 450.0, limit_w: float = 1100.0,
                 model: str = "NVIDIA B300 (simulated)", hostname: str = "sim-node-0",
                 collect_interval_s: float = 0.0, export_energy: bool = True, export_limit: bool = True,
                 hostname_label: str = "Hostname", driver_version: str = "580.00.01",
                 t_ns: int | None = None, collect_on_timer: bool = False, busy_fraction: float = 1.0):
        if not 0 <= idle_w <= load_w:
            raise ValueError("need 0 <= idle_w <= load_w")
        self.n, self.idle_w, self.load_w, self.limit_w = n, idle_w, load_w, limit_w
        self.model, self.hostname, self.hostname_label = model, hostname, hostname_label
        self.driver_version = driver_version
        self.collect_interval_s = collect_interval_s
        self.export_energy, self.export_limit = export_energy, export_limit
        self.uuids = [_uuid(hostname, i) for i in range(n)]
        self._lock = threading.Lock()
        self._t0_ns = self._t_ns = time.monotonic_ns() if t_ns is None else t_ns
        self._u = 0.0  # the load that draws power (capped at the limit)
        self.busy = 0.0  # the GPUs' busy fraction: the engine's load times busy_fraction (util, profiling)
        self.busy_fraction = busy_fraction
        self.changed_ns = self._t0_ns
        self._u_integral_s = 0.0  # ∫u dt from t0 to _t_ns
        self.collect_on_timer = collect_on_timer
        self.history = EnergyHistory(self._t0_ns)
        self._counter_base_mj = [0.0] * n
        self._snapshot: tuple[int, str] | None = None
        self._renders = 0
        self._answering = True
        self._fault_mode = "hang"
        self._resume: asyncio.Event | None = None
        self.profile = GpuProfile(idle_w, load_w, limit_w)  # activity, clocks, throttling, XID

    # --- load and truth -------------------------------------------------------------------------
    def set_utilization(self, u: float, t_ns: int | None = None) -> None:
        """The engine's load changed to `u` (0 idle .. 1 full) at `t_ns` (now if None)."""
        busy = min(1.0, max(0.0, float(u))) * self.busy_fraction
        with self._lock:
            t_ns = self._clamp(t_ns)
            self._u_integral_s += self._u * (t_ns - self._t_ns) / 1e9
            self.profile.advance(self.busy, t_ns - self._t_ns)
            self._t_ns, self.changed_ns = t_ns, t_ns
            self.busy, self._u = busy, self.profile.capped(busy)
            self.history.changed(t_ns, self._u_integral_s, self._u)

    @property
    def utilization(self) -> float:
        return self._u

    def offset_w(self, gpu: int) -> float:
        return _OFFSETS_W[gpu % len(_OFFSETS_W)]

    def power_w(self, gpu: int, t_ns: int | None = None) -> float:
        """Power drawn by `gpu` now (W); `t_ns` is accepted for symmetry, power only changes via set_utilization."""
        return self.idle_w + self.offset_w(gpu) + (self.load_w - self.idle_w) * self._u

    def energy_mj(self, gpu: int, t_ns: int | None = None) -> float:
        """Exact energy drawn by `gpu` from construction to `t_ns` (mJ)."""
        with self._lock:
            t_ns = self._clamp(t_ns)
            u_integral_s = self._u_integral_s + self._u * (t_ns - self._t_ns) / 1e9
            base_j = (self.idle_w + self.offset_w(gpu)) * (t_ns - self._t0_ns) / 1e9
            return 1000.0 * (base_j + (self.load_w - self.idle_w) * u_integral_s)

    def counter_mj(self, gpu: int, t_ns: int | None = None) -> float:
        """The exported energy counter (mJ): energy_mj minus the value at the last reset."""
        return self.energy_mj(gpu, t_ns) - self._counter_base_mj[gpu]

    def reset_counter(self, gpu: int | None = None, t_ns: int | None = None) -> None:
        """The energy counter restarts at 0, as after a driver reload."""
        t_ns = self._clamp(t_ns)
        for i in range(self.n) if gpu is None else (gpu,):
            self._counter_base_mj[i] = self.energy_mj(i, t_ns)
        self._snapshot = None

    def _clamp(self, t_ns: int | None) -> int:
        return max(self._t_ns, time.monotonic_ns() if t_ns is None else t_ns)

    # --- exposition -----------------------------------------------------------------------------
    def render_metrics(self, t_ns: int | None = None) -> str:
        """dcgm-exporter `/metrics` text at `t_ns`; with collect_interval_s > 0, the last collected text."""
        t_ns = self._clamp(t_ns)
        snap = self._snapshot
        fresh_s = self.collect_interval_s
        if snap is not None and (self.collect_on_timer or fresh_s > 0 and t_ns - snap[0] < fresh_s * 1e9):
            return snap[1]
        text = self._render(t_ns)
        self._snapshot = (t_ns, text)
        return text

    def collect(self, t_ns: int | None = None) -> None:
        """Refresh the served values now (the timer collector's tick)."""
        self._snapshot = (t := self._clamp(t_ns), self._render(t))

    def _render(self, t_ns: int) -> str:
        u, busy = self._u, self.busy
        rows: dict[str, list] = {name: [] for name in (
            "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", POWER, ENERGY, "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_FB_USED", MGMT_LIMIT)}
        for i in range(self.n):
            labels = dcgm_labels(i, self.uuids[i], f"00000000:{0x18 + 0x10 * i:02X}:00.0", self.model,
                                 self.hostname, self.driver_version, self.hostname_label)
            rows["DCGM_FI_DEV_SM_CLOCK"].append((labels, self.profile.sm_clock_mhz(busy)))
            rows["DCGM_FI_DEV_GPU_TEMP"].append((labels, int(32 + 40 * u)))
            rows[POWER].append((labels, round(self.power_w(i) + self._sensor_noise_w(i), 6)))
            if self.export_energy:
                rows[ENERGY].append((labels, int(self.counter_mj(i, t_ns))))
            rows["DCGM_FI_DEV_GPU_UTIL"].append((labels, round(100 * busy)))
            rows["DCGM_FI_DEV_FB_USED"].append((labels, FB_USED_MIB))
            if self.export_limit:
                rows[MGMT_LIMIT].append((labels, self.limit_w))
            for name, value in self.profile.fields(busy, t_ns - self._t_ns).items():
                rows.setdefault(name, []).append((labels, value))
        return render_dcgm(rows)

    def _sensor_noise_w(self, gpu: int) -> float:
        # A real power reading moves every few ms; a constant one is how a stale exporter is recognised.
        # So readings carry ±0.05 W of deterministic noise; the energy truth stays exact.
        self._renders += 1
        return ((self._renders * 7919 + gpu * 104729) % 11 - 5) * 0.01

    # --- HTTP and faults ------------------------------------------------------------------------
    def make_app(self) -> web.Application:
        """An aiohttp app serving GET /metrics (dcgm-exporter text) and GET /health."""
        app = web.Application()
        app.router.add_get("/metrics", self._handle_metrics)
        app.router.add_get("/health", self._handle_health)
        app.router.add_get("/truth/energy", truth_route(self))
        if self.collect_on_timer and self.collect_interval_s > 0:
            app.cleanup_ctx.append(timer_collector(self, self.collect_interval_s))
        app.on_shutdown.append(self._release_hung)
        return app

    def stop_answering(self, mode: str = "hang") -> None:
        """From now on requests hang ("hang"), lose their connection ("close") or get HTTP 503 ("error")."""
        if mode not in ("hang", "close", "error"):
            raise ValueError(f"unknown fault mode {mode!r}")
        self._answering, self._fault_mode = False, mode
        self._resume = None

    def resume_answering(self) -> None:
        self._answering = True
        if self._resume is not None:
            self._resume.set()

    async def _fault(self, request: web.Request) -> web.Response | None:
        if self._answering:
            return None
        if self._fault_mode == "error":
            return web.Response(status=503, text="simulated exporter failure\n")
        if self._fault_mode == "close":
            if request.transport is not None:  # None: the client already closed it
                request.transport.close()
            raise asyncio.CancelledError
        if self._resume is None:
            self._resume = asyncio.Event()
        await self._resume.wait()
        return None

    async def _release_hung(self, app: web.Application) -> None:
        if self._resume is not None:
            self._resume.set()  # let hung handlers finish so the server shuts down promptly

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        fault = await self._fault(request)
        if fault is not None:
            return fault
        return web.Response(text=self.render_metrics(), content_type="text/plain")

    async def _handle_health(self, request: web.Request) -> web.Response:
        fault = await self._fault(request)
        return fault if fault is not None else web.Response(text="OK\n")

    # --- NVML view ------------------------------------------------------------------------------
    def nvml(self, energy_supported: bool = True) -> SimulatedNvml:
        """A pynvml-compatible module over these GPUs (what `nvidia-ml-py` would show on this box)."""
        return SimulatedNvml(self, energy_supported)


def _uuid(hostname: str, i: int) -> str:
    h = hashlib.sha1(f"{hostname}/{i}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
