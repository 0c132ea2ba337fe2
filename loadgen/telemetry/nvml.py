"""GPU power per cell from NVML (the `nvidia-ml-py` package, module `pynvml`) on the local machine.

For hosts without dcgm-exporter (sandboxes, laptops, a single box). `NvmlSource(interval_s=1.0)` gives
the same `values` as `dcgm.DcgmSource` (see `power.summarize_power`), with `source` "nvml" and each GPU's
`node` "nvml://<hostname>". NVML units: power and limits in mW, energy in mJ (a counter since the driver
loaded, the same one DCGM's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` exports). Every NVML call runs in a
worker thread (`asyncio.to_thread`): a call can block for tens of ms, longer on a busy or sick GPU, and
the event loop is timing requests.

No library, no driver or no GPU is a one-line reason (`nvml_available()`), never a crash. The helpers
below (`open_devices`, `read_power`, `dcgm_text`) are also what `exporters/nvml.py` serves from.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from loadgen.metrics.gpu_activity import FIELDS, GpuActivityStats
from loadgen.metrics.power import GpuPowerStats, summarize_power
from loadgen.telemetry.base import PeriodicSampler, SourceResult
from loadgen.telemetry.dcgm_format import ENERGY, ENFORCED_LIMIT, MGMT_LIMIT, POWER, dcgm_labels, render_dcgm

INSTALL_HINT = "pip install nvidia-ml-py"
# NVML's utilization is the share of its last sample period (1/6 s to 1 s, by product) with a kernel running;
# the shortest is taken as how far back a reading reaches (gpu_activity's hold): the rest holds forward
SAMPLE_PERIOD_NS = 1e9 / 6


def load_nvml() -> ModuleType:
    """The `pynvml` module from nvidia-ml-py; ImportError when it is not installed."""
    import pynvml  # optional dependency (the `nvml` extra): imported only when NVML is asked for

    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# NVML raises one error class per status code (NotSupported, GpuIsLost, ...) and the library may be an
# older or a fake one: telemetry catches them all, since a failed read must never take a run down.


def _call(fn, *args) -> Any:
    """An optional NVML query: None when the GPU does not support it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001
        return None


def nvml_available(nvml: Any = None) -> tuple[bool, str]:
    """(True, "NVML: 8 GPUs, NVIDIA H200") or (False, a one-line reason). Initialises and shuts NVML down."""
    if nvml is None:
        try:
            nvml = load_nvml()
        except ImportError:
            return False, f"NVML unavailable: the nvidia-ml-py package is not installed ({INSTALL_HINT})"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return False, (f"NVML unavailable: could not initialise NVML ({_text(exc) or type(exc).__name__}); "
                       f"is an NVIDIA driver loaded?")
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return False, "NVML unavailable: NVML found no GPU"
        name = _text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0)))
        return True, f"NVML: {count} GPU{'s' if count > 1 else ''}, {name}"
    except Exception as exc:  # noqa: BLE001
        return False, f"NVML unavailable: {_text(exc) or type(exc).__name__}"
    finally:
        _call(nvml.nvmlShutdown)


@dataclass
class NvmlDevice:
    index: int
    handle: Any
    name: str
    uuid: str
    pci_bus_id: str
    mgmt_limit_w: float | None
    enforced_limit_w: float | None
    has_energy: bool

    @property
    def limit_w(self) -> float | None:
        """The enforced limit (what actually caps the GPU), else the management limit (W)."""
        return self.enforced_limit_w if self.enforced_limit_w is not None else self.mgmt_limit_w


def _mw_to_w(mw: Any) -> float | None:
    return None if mw is None else mw / 1000.0


def open_devices(nvml: Any) -> list[NvmlDevice]:
    """Every GPU NVML sees, with the static facts (name, UUID, limits, energy counter support). NVML must be
    initialised."""
    devices = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        pci = _call(nvml.nvmlDeviceGetPciInfo, h)
        devices.append(NvmlDevice(
            index=i, handle=h, name=_text(nvml.nvmlDeviceGetName(h)), uuid=_text(nvml.nvmlDeviceGetUUID(h)),
            pci_bus_id=_text(pci.busId) if pci is not None else "",
            mgmt_limit_w=_mw_to_w(_call(nvml.nvmlDeviceGetPowerManagementLimit, h)),
            enforced_limit_w=_mw_to_w(_call(nvml.nvmlDeviceGetEnforcedPowerLimit, h)),
            has_energy=_call(nvml.nvmlDeviceGetTotalEnergyConsumption, h) is not None,
        ))
    return devices


def read_power(nvml: Any, dev: NvmlDevice) -> tuple[float, float | None]:
    """(power W, energy counter mJ or None). Raises NVML's error when the GPU cannot be read."""
    power_w = nvml.nvmlDeviceGetPowerUsage(dev.handle) / 1000.0
    energy_mj = float(nvml.nvmlDeviceGetTotalEnergyConsumption(dev.handle)) if dev.has_energy else None
    return power_w, energy_mj


def _clock_events(nvml: Any, handle: Any) -> Any:
    """The current clock-event reason bits (nvidia-ml-py ≥ 12.535 names them "clocks event", older "throttle")."""
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, name):
            return _optional(nvml, name, handle)
    return None


def _optional(nvml: Any, name: str, *args) -> Any:
    """An NVML query this library may not have (an older or a fake one): None then, or when it fails."""
    fn = getattr(nvml, name, None)
    return None if fn is None else _call(fn, *args)


def _violation_ns(nvml: Any, handle: Any, policy: int) -> Any:
    status = _optional(nvml, "nvmlDeviceGetViolationStatus", handle, policy)
    return None if status is None else status.violationTime


def read_activity(nvml: Any, dev: NvmlDevice) -> dict[str, float]:
    """The GPU's activity quantities now (`gpu_activity.FIELDS` names; those NVML gives on this GPU):
    utilization.gpu (%), SM clock and its maximum (MHz), framebuffer used (MiB), the clock-event reason
    bits, and the power and thermal violation times (ns since the driver loaded)."""
    h, sm = dev.handle, getattr(nvml, "NVML_CLOCK_SM", 1)
    util = _optional(nvml, "nvmlDeviceGetUtilizationRates", h)
    mem = _optional(nvml, "nvmlDeviceGetMemoryInfo", h)
    values = {
        "utilization_percent": None if util is None else util.gpu,
        "sm_clock_mhz": _optional(nvml, "nvmlDeviceGetClockInfo", h, sm),
        "sm_clock_max_mhz": _optional(nvml, "nvmlDeviceGetMaxClockInfo", h, sm),
        "memory_used_mib": None if mem is None else mem.used / 2**20,
        "clock_events": _clock_events(nvml, h),
        "power_violation_ns": _violation_ns(nvml, h, getattr(nvml, "NVML_PERF_POLICY_POWER", 0)),
        "thermal_violation_ns": _violation_ns(nvml, h, getattr(nvml, "NVML_PERF_POLICY_THERMAL", 1)),
    }
    return {k: v for k, v in values.items() if v is not None}


NVML_MISSING = {q: "NVML did not give it on this GPU (not supported)" for q in FIELDS} | {
    q: "NVML has no profiling counters: read DCGM_FI_PROF_* from dcgm-exporter with --dcgm"
    for q in ("gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active")}
_DCGM_OF = {"utilization_percent": "DCGM_FI_DEV_GPU_UTIL", "sm_clock_mhz": "DCGM_FI_DEV_SM_CLOCK",
            "sm_clock_max_mhz": "DCGM_FI_DEV_MAX_SM_CLOCK", "clock_events": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "power_violation_ns": "DCGM_FI_DEV_POWER_VIOLATION", "thermal_violation_ns": "DCGM_FI_DEV_THERMAL_VIOLATION"}


def dcgm_text(nvml: Any, devices: list[NvmlDevice], hostname: str, driver_version: str) -> str:
    """One collection of every GPU, as dcgm-exporter exposition text (same names, units and labels).

    A GPU that cannot be read is left out of this collection rather than shown with stale values.
    """
    rows: dict[str, list] = {}

    def put(name: str, labels: dict, value: Any) -> None:
        if value is not None:
            rows.setdefault(name, []).append((labels, value))

    for dev in devices:
        try:
            power_w, energy_mj = read_power(nvml, dev)
        except Exception:  # noqa: BLE001, S112
            continue
        labels = dcgm_labels(dev.index, dev.uuid, dev.pci_bus_id, dev.name, hostname, driver_version)
        activity = read_activity(nvml, dev)
        for quantity, name in _DCGM_OF.items():
            put(name, labels, activity.get(quantity))
        put("DCGM_FI_DEV_GPU_TEMP", labels,
            _call(nvml.nvmlDeviceGetTemperature, dev.handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)))
        put(POWER, labels, round(power_w, 3))
        put(ENERGY, labels, None if energy_mj is None else int(energy_mj))
        put("DCGM_FI_DEV_FB_USED", labels, None if "memory_used_mib" not in activity
            else int(activity["memory_used_mib"]))
        put(MGMT_LIMIT, labels, dev.mgmt_limit_w)
        put(ENFORCED_LIMIT, labels, dev.enforced_limit_w)
    return render_dcgm(rows)


class NvmlSource(PeriodicSampler):
    """Samples every local GPU through NVML during a cell; values as `DcgmSource`'s, `source` "nvml"."""

    name = "nvml"
    kind = "power"

    def __init__(self, interval_s: float = 1.0, nvml: Any = None):
        super().__init__(interval_s)
        self._nvml = nvml
        self._devices: list[NvmlDevice] = []
        self._stats: list[GpuPowerStats] = []
        self._activity: list[GpuActivityStats] = []
        self._read_errors: dict[int, str] = {}
        self._unavailable: str | None = None
        self._initialised = False
        self.max_w_total: float | None = None
        self.node = f"nvml://{socket.gethostname()}"

    async def start(self) -> None:
        ok, reason = await asyncio.to_thread(nvml_available, self._nvml)
        if ok:
            try:
                nvml = self._nvml or load_nvml()
                await asyncio.to_thread(nvml.nvmlInit)
                self._nvml, self._initialised = nvml, True
                self._devices = await asyncio.to_thread(open_devices, nvml)
                self._stats = [GpuPowerStats() for _ in self._devices]
                self._activity = [GpuActivityStats() for _ in self._devices]
            except Exception as exc:  # noqa: BLE001
                ok, reason = False, f"NVML unavailable: {_text(exc) or type(exc).__name__}"
        if not ok:
            self._unavailable = reason
            self.t_start_ns = time.monotonic_ns()
            return
        await super().start()

    async def stop(self) -> SourceResult:
        if self._unavailable is not None:
            self.t_stop_ns = time.monotonic_ns()
            return SourceResult(self.name, self.kind, False, reason=self._unavailable)
        try:
            return await super().stop()
        finally:
            if self._initialised:
                await asyncio.to_thread(_call, self._nvml.nvmlShutdown)
                self._initialised = False

    def _read_all(self) -> list[tuple[int, float, float | None] | None]:
        out: list[tuple[int, float, float | None] | None] = []
        for dev in self._devices:
            t0 = time.monotonic_ns()
            try:
                power_w, energy_mj = read_power(self._nvml, dev)
            except Exception as exc:  # noqa: BLE001
                self._read_errors[dev.index] = _text(exc) or type(exc).__name__
                out.append(None)
                continue
            out.append(((t0 + time.monotonic_ns()) // 2, power_w, energy_mj))
        for dev, activity, reading in zip(self._devices, self._activity, out):
            if reading is not None:  # after the power readings, which the energy's edges are cut by
                activity.add(time.monotonic_ns(), read_activity(self._nvml, dev), SAMPLE_PERIOD_NS)
        return out

    async def sample(self, t_ns: int) -> None:
        readings = await asyncio.to_thread(self._read_all)
        round_w = 0.0
        for dev, stats, reading in zip(self._devices, self._stats, readings):
            if reading is not None:
                stats.add(reading[0], reading[1], reading[2], dev.limit_w)
                round_w += reading[1]
        if any(r is not None for r in readings):
            self.max_w_total = round_w if self.max_w_total is None else max(self.max_w_total, round_w)

    def result(self) -> SourceResult:
        window_s = max(0.0, (self.t_stop_ns - self.t_start_ns) / 1e9)
        per_gpu = [
            {"node": self.node, "gpu": dev.index, "uuid": dev.uuid, "hostname": self.node[len("nvml://"):],
             "model": dev.name, **stats.figures()}
            for dev, stats in zip(self._devices, self._stats)
        ]
        values = summarize_power("nvml", per_gpu, self.max_w_total, window_s)
        values["activity_gpus"] = [{"node": self.node, "gpu": dev.index, "uuid": dev.uuid, "series": a.to_json()}
                                   for dev, a in zip(self._devices, self._activity)]
        values["activity_missing"] = NVML_MISSING
        losses = [f"nvml: GPU {i} could not be read ({err}); its figures cover only the readings that worked"
                  for i, err in sorted(self._read_errors.items())]
        warnings = list(losses)
        no_counter = [str(d.index) for d in self._devices if not d.has_energy]
        if no_counter:
            warnings.append(f"nvml: no energy counter on GPU {', '.join(no_counter)}: energy integrated from "
                            f"power readings (trapezoid, every {self.interval_s:g} s)")
        failed = [f"nvml: sampling failed: {e}" for e in self.errors[:3]]
        return SourceResult(self.name, self.kind, True, values=values, warnings=warnings + failed,
                            losses=losses + failed)
