"""The `gpu` part of a cell's result: how busy its GPUs were and what limited the cell (docs/bottleneck.md),
filled by `build_cell` from `metrics/gpu_window.py` and `metrics/bottleneck.py`."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.results.fields_doc import doc
from loadgen.results.figures import GpuActivity


@dataclass
class Gpu:
    """GPU activity over the cell's window and what limited the cell (bottleneck.md)."""

    gpu_activity: GpuActivity | None = doc(
        "{source, gpus, total, per_gpu, unavailable}: time-weighted over the window, per GPU and in total (mean "
        "over GPUs; memory and violation seconds summed): utilization_percent, sm_clock_mhz, sm_clock_max_mhz, "
        "sm_clock_fraction, gr_engine_active, sm_active, sm_occupancy, tensor_active, dram_active, "
        "memory_used_mib, power_cap_fraction, thermal_fraction, hw_slowdown_fraction, power_violation_s, "
        "power_violation_fraction, thermal_violation_s; a figure not served is absent, `unavailable` says why",
        "%, MHz, ratio, MiB, s", optional=True)
    bottleneck: str | None = doc("client | server_host | gpu_power_cap | gpu_thermal | gpu_memory_bandwidth | "
                                 "gpu_compute | unknown, with its evidence in bottleneck_evidence", optional=True)
    bottleneck_evidence: str | None = doc("why: the figures behind `bottleneck`, one line", optional=True)
    gpu_bottleneck: str | None = doc("only when `bottleneck` is client: what the GPU figures alone say, "
                                     "'verdict: evidence'", optional=True)
