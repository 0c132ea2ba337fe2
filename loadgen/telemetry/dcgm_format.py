"""dcgm-exporter's exposition text, both ways: the metric catalogue and label set it serves, a renderer, and
the parser `dcgm.DcgmSource` reads a scrape with.

The simulator and the NVML exporter render through `render_dcgm`, so they serve the same names, units and
labels as the real exporter. Units as dcgm-exporter serves them: power and limits in W, energy in mJ (a
counter since boot). DCGM writes a "blank" sentinel (an int64 ≥ 0x7ffffffffffffff0, so ≥ `BLANK_THRESHOLD`)
for a field a GPU does not support; the parser drops those and says which fields sent them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from loadgen.metrics.gpu_activity import FIELDS
from loadgen.telemetry.promtext import parse_text, render_family

POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
MGMT_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
ENFORCED_LIMIT = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
BLANK_THRESHOLD = 1e18

# name -> (type, help) as dcgm-exporter's counters CSV declares them; the order is the rendering order.
DCGM_FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("gauge", "Maximum SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("gauge", "Current clock event (throttle) reasons (bitmask)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    POWER: ("gauge", "Power draw (in W)."),
    ENERGY: ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    MGMT_LIMIT: ("gauge", "Power management limit (in W)."),
    ENFORCED_LIMIT: ("gauge", "Enforced power limit (in W)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("gauge", "The ratio of number of warps resident on an SM."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_DEV_POWER_VIOLATION": ("counter", "Throttling duration due to power constraints (in ns)."),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("counter", "Throttling duration due to thermal constraints (in ns)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
}
# DCGM field -> the activity quantity it feeds (`loadgen.metrics.gpu_activity.FIELDS`). Both names of the
# reason bitmask: DCGM renamed CLOCK_THROTTLE_REASONS to CLOCKS_EVENT_REASONS (same field, 112). The violation
# counters are read as ns, as NVML's violation status (which DCGM reads) gives them (power.md).
ACTIVITY_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization_percent",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MAX_SM_CLOCK": "sm_clock_max_mhz",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_events",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "clock_events",
    "DCGM_FI_DEV_POWER_VIOLATION": "power_violation_ns",
    "DCGM_FI_DEV_THERMAL_VIOLATION": "thermal_violation_ns",
}
_WANTED = (POWER, ENERGY, MGMT_LIMIT, ENFORCED_LIMIT, *ACTIVITY_FIELDS)


def dcgm_names(quantity: str) -> list[str]:
    """The DCGM fields that feed an activity quantity (`ACTIVITY_FIELDS`)."""
    return [name for name, q in ACTIVITY_FIELDS.items() if q == quantity]


def missing_reasons(where: str) -> dict[str, str]:
    """Why a dcgm-exporter lacks each activity quantity it may not serve: quantity -> one line."""
    out = {}
    for quantity in FIELDS:
        names = " / ".join(dcgm_names(quantity))
        how = ("needs DCGM's profiling module (datacenter GPUs) and the field in dcgm-exporter's counters CSV, -f"
               if names.startswith("DCGM_FI_PROF") else "add it to dcgm-exporter's counters CSV, -f")
        out[quantity] = f"{where} does not export {names} ({how})"
    return out


def dcgm_labels(gpu: int, uuid: str, pci_bus_id: str, model: str, hostname: str, driver_version: str,
                hostname_label: str = "Hostname") -> dict[str, str]:
    """dcgm-exporter's label set, in its order. `hostname_label` is "hostname" for builds after 4.5.3-4.8.2."""
    return {
        "gpu": str(gpu), "UUID": uuid, "pci_bus_id": pci_bus_id, "device": f"nvidia{gpu}",
        "modelName": model, hostname_label: hostname, "DCGM_FI_DRIVER_VERSION": driver_version,
    }


def render_dcgm(rows: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    """Exposition text for {metric name: [(labels, value), ...]}, metrics in `DCGM_FIELDS` order."""
    return "".join(
        render_family(name, kind, help_text, rows[name])
        for name, (kind, help_text) in DCGM_FIELDS.items()
        if rows.get(name)
    )


@dataclass
class GpuReading:
    """One GPU's power-related values in one scrape (W, mJ, W) and its activity fields."""

    gpu: str
    uuid: str
    hostname: str | None
    model: str | None
    power_w: float | None = None
    energy_mj: float | None = None
    limit_w: float | None = None
    activity: dict[str, float] = field(default_factory=dict)  # quantity (ACTIVITY_FIELDS' values) -> value

    def put(self, name: str, value: float) -> None:
        if name == POWER:
            self.power_w = value
        elif name == ENERGY:
            self.energy_mj = value
        elif name == ENFORCED_LIMIT or (name == MGMT_LIMIT and self.limit_w is None):
            self.limit_w = value  # the enforced limit is what actually caps the GPU: it wins
        if name in ACTIVITY_FIELDS:
            self.activity.setdefault(ACTIVITY_FIELDS[name], value)


@dataclass
class ParsedScrape:
    readings: list[GpuReading]
    blank_fields: set[str] = field(default_factory=set)
    skipped_lines: int = 0


def parse_dcgm(text: str) -> ParsedScrape:
    """The power-related values per GPU in one dcgm-exporter answer; blank sentinels and NaN dropped.

    A GPU is keyed by (`gpu`, `UUID`|`uuid`); the first sample of a metric per GPU wins, so series that
    repeat a device-level field per MIG instance are not counted twice.
    """
    parsed = parse_text(text, _WANTED)
    gpus: dict[tuple[str, str], GpuReading] = {}
    blanks: set[str] = set()
    seen: set[tuple] = set()
    for name, labels, value in parsed.samples:
        if math.isnan(value):
            continue
        if abs(value) >= BLANK_THRESHOLD:
            blanks.add(name)
            continue
        key = (labels.get("gpu", ""), labels.get("UUID") or labels.get("uuid", ""))
        if (key, name) in seen:
            continue
        seen.add((key, name))
        if key not in gpus:
            gpus[key] = GpuReading(gpu=key[0], uuid=key[1], hostname=labels.get("Hostname") or labels.get("hostname"),
                                   model=labels.get("modelName"))
        gpus[key].put(name, value)
    return ParsedScrape(list(gpus.values()), blanks, parsed.skipped_lines)
