"""The subset of pynvml (nvidia-ml-py) loadgen uses, answering from a `SimulatedGpus` (`gpus.nvml()`)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

from loadgen.sim.gpu_profile import FB_USED_MIB, SM_CLOCK_MAX_MHZ

if TYPE_CHECKING:
    from loadgen.sim.gpus import SimulatedGpus


class SimulatedNvml:
    """The subset of pynvml (nvidia-ml-py) loadgen uses, answering from a `SimulatedGpus`.

    Units as NVML gives them: power and limits in mW (ints), energy in mJ (int counter).
    """

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self, gpus: SimulatedGpus, energy_supported: bool = True):
        self.gpus = gpus
        self.energy_supported = energy_supported
        self.initialized = 0

    def nvmlInit(self) -> None:
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.gpus.driver_version

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus.n

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < self.gpus.n:
            raise self.NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.gpus.model

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self.gpus.uuids[handle]

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=f"00000000:{0x18 + 0x10 * handle:02X}:00.0")

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return round(self.gpus.power_w(handle) * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if not self.energy_supported:
            raise self.NVMLError_NotSupported("Not Supported")
        return int(self.gpus.counter_mj(handle))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return round(self.gpus.limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:
        return round(self.gpus.limit_w * 1000)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        pct = round(100 * self.gpus.busy)
        return SimpleNamespace(gpu=pct, memory=pct)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(32 + 40 * self.gpus.utilization)

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return self.gpus.profile.sm_clock_mhz(self.gpus.busy)

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        return SM_CLOCK_MAX_MHZ

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self.gpus.profile.clock_events(self.gpus.busy)

    def nvmlDeviceGetViolationStatus(self, handle: int, policy: int) -> SimpleNamespace:
        ns = self.gpus.profile.violation_ns(self.gpus.busy, time.monotonic_ns() - self.gpus.changed_ns)
        return SimpleNamespace(referenceTime=time.monotonic_ns() // 1000, violationTime=ns if policy == 0 else 0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=FB_USED_MIB * 2**20)
