"""What limited a cell's throughput: one verdict (`Bottleneck`) with its evidence in one line (pure).

The rules, first match wins (thresholds and their reasons: docs/bottleneck.md):
1. client: the client's saturation check fired (`client_health.client_verdict`): its figures measure itself.
2. unknown: no GPU activity figures (no --dcgm / --nvml, or the source served none).
3. gpu_power_cap: a power-cap clock-event reason set ≥ THROTTLE_FRACTION (50 %) of the cell (or, where the
   reasons are not served, the power-violation counter grew by ≥ 50 % of the cell's time). Throttling comes
   before utilization: a GPU held at its limit half the cell is not waiting on the host, whatever the gaps.
4. gpu_thermal: a thermal or hardware-slowdown reason set ≥ 50 % of the cell.
5. server_host: utilization < SERVER_HOST_UTIL_PERCENT (50 %) while ≥ IN_FLIGHT_MIN (0.5) requests were in
   flight on average (achieved concurrency): the GPU waits for the server's host side (scheduling,
   tokenisation, sampling, Python) between steps.
6. gpu_memory_bandwidth: DRAM_ACTIVE ≥ DRAM_BOUND (0.5) and PIPE_TENSOR_ACTIVE < TENSOR_IDLE (0.3).
7. gpu_compute: utilization ≥ BUSY_UTIL_PERCENT (80 %) and PIPE_TENSOR_ACTIVE ≥ 0.3 or SM_ACTIVE ≥ SM_BUSY (0.8).
8. unknown, saying what was seen.
Utilization is DCGM_FI_DEV_GPU_UTIL / NVML's utilization.gpu, else 100 · GR_ENGINE_ACTIVE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.names import Bottleneck

SERVER_HOST_UTIL_PERCENT = 50.0
IN_FLIGHT_MIN = 0.5
THROTTLE_FRACTION = 0.5
DRAM_BOUND = 0.5
TENSOR_IDLE = 0.3
BUSY_UTIL_PERCENT = 80.0
SM_BUSY = 0.8


def utilization_percent(total: Mapping[str, Any]) -> float | None:
    """The GPUs' busy percentage: utilization, else 100 · GR_ENGINE_ACTIVE; None when neither was served."""
    if total.get("utilization_percent") is not None:
        return total["utilization_percent"]
    return None if total.get("gr_engine_active") is None else 100 * total["gr_engine_active"]


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _clock(total: dict) -> str:
    fraction = total.get("sm_clock_fraction")
    return "" if fraction is None else f", SM clock {_pct(fraction)} of max"


def _power_cap(total: dict, limit_w: float | None) -> str | None:
    at_cap = total.get("power_cap_fraction")
    where = f"the {limit_w:.0f} W power limit" if limit_w else "the power limit"
    if at_cap is not None:
        return f"at {where} {_pct(at_cap)} of the cell{_clock(total)}" if at_cap >= THROTTLE_FRACTION else None
    violation = total.get("power_violation_fraction")
    if violation is not None and violation >= THROTTLE_FRACTION:
        return f"throttled by {where} {_pct(violation)} of the cell (power-violation time){_clock(total)}"
    return None


def _thermal(total: dict) -> str | None:
    thermal, slowdown = total.get("thermal_fraction") or 0.0, total.get("hw_slowdown_fraction") or 0.0
    if max(thermal, slowdown) < THROTTLE_FRACTION:
        return None
    what = "thermal slowdown" if thermal >= slowdown else "hardware slowdown"
    return f"{what} {_pct(max(thermal, slowdown))} of the cell{_clock(total)}"


def _memory_or_compute(total: dict, util: float) -> tuple[Bottleneck, str] | None:
    dram, tensor, sm = total.get("dram_active"), total.get("tensor_active"), total.get("sm_active")
    if dram is not None and tensor is not None and dram >= DRAM_BOUND and tensor < TENSOR_IDLE:
        return Bottleneck.GPU_MEMORY_BANDWIDTH, (f"DRAM {_pct(dram)} active, tensor pipe {_pct(tensor)}: "
                                                 "memory-bandwidth-bound, compute to spare (a larger draft tree "
                                                 "costs little)")
    if util >= BUSY_UTIL_PERCENT and ((tensor or 0.0) >= TENSOR_IDLE or (sm or 0.0) >= SM_BUSY):
        seen = ", ".join(f"{label} {_pct(v)}" for label, v in (("tensor pipe", tensor), ("SM active", sm),
                                                                 ("DRAM", dram)) if v is not None)
        return Bottleneck.GPU_COMPUTE, f"GPU {util:.0f} % busy, {seen}: compute-bound"
    return None


def _unknown(total: dict, util: float) -> str:
    if total.get("dram_active") is None or total.get("tensor_active") is None:
        return (f"GPU {util:.0f} % busy, not throttled; without DCGM profiling ratios (DRAM_ACTIVE, "
                "PIPE_TENSOR_ACTIVE) memory-bound cannot be told from compute-bound")
    return (f"GPU {util:.0f} % busy, DRAM {_pct(total['dram_active'])}, tensor pipe "
            f"{_pct(total['tensor_active'])}, not throttled: no single limit stands out")


def bottleneck(client: dict | None, activity: dict | None, in_flight: float | None,
               limit_w: float | None = None) -> tuple[Bottleneck, str]:
    """(verdict, evidence) for a cell: `client` its client-health block, `activity` its GPU activity figures
    (`gpu_window.cell_activity`), `in_flight` its achieved concurrency, `limit_w` one GPU's power limit."""
    if client and client.get("saturated"):
        why = "; ".join(client.get("reasons") or []) or "saturated"
        return Bottleneck.CLIENT, f"the client fell behind ({why}): its figures measure the client; add --workers"
    return gpu_bottleneck(activity, in_flight, limit_w)


def gpu_bottleneck(activity: dict | None, in_flight: float | None,
                   limit_w: float | None = None) -> tuple[Bottleneck, str]:
    """(verdict, evidence) from the GPU figures alone: rules 2-8 of the module docstring."""
    total = (activity or {}).get("total") or {}
    util = utilization_percent(total)
    if util is None:
        return Bottleneck.UNKNOWN, "no GPU utilization measured (--dcgm URL or --nvml, with DCGM_FI_DEV_GPU_UTIL)"
    for verdict, evidence in ((Bottleneck.GPU_POWER_CAP, _power_cap(total, limit_w)),
                              (Bottleneck.GPU_THERMAL, _thermal(total))):
        if evidence:
            return verdict, evidence
    if util < SERVER_HOST_UTIL_PERCENT and (in_flight or 0.0) >= IN_FLIGHT_MIN:
        return Bottleneck.SERVER_HOST, (f"GPU {util:.0f} % busy with {in_flight:.0f} requests in flight: the "
                                        "server's host side, not the GPU, limits throughput")
    return _memory_or_compute(total, util) or (Bottleneck.UNKNOWN, _unknown(total, util))
