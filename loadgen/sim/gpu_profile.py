"""The simulated GPUs' activity, clocks and health: profiling ratios, SM clock, clock-event reasons, the power
cap, violation time, XID.

`busy` is the GPUs' busy fraction (the engine's load times the GPUs' `busy_fraction`; 0.17 is a server whose
host work between steps leaves the GPU idle 83 % of the time). LLM decoding streams the weights and the KV
cache for every token, so while busy the memory interface is active (DRAM_ACTIVE 0.8 · busy) and the tensor
pipes mostly wait (0.2 · busy): the memory-bound picture. GR_ENGINE_ACTIVE = busy, SM_ACTIVE = 0.9 · busy,
SM_OCCUPANCY = 0.35 · busy.

Power cap: the power the load wants, idle_w + (load_w − idle_w) · busy, is held at limit_w (`capped`: the
load that draws power is at most (limit_w − idle_w) / (load_w − idle_w)); while the wanted power reaches the
limit the GPU is throttled: the SW_POWER_CAP reason is set, the violation counter accumulates that time (ns,
as NVML's violation status gives it), and the SM clock drops to max · capped / busy (the work slows in
proportion). An idle GPU (busy 0) shows the GPU_IDLE reason and its idle clock. No thermal throttling, and
no XID error unless a test sets `xid`.
"""

from __future__ import annotations

from loadgen.metrics.gpu_activity import GPU_IDLE, SW_POWER_CAP

DRAM_IDLE, DRAM_LOAD = 0.02, 0.80
TENSOR_IDLE, TENSOR_LOAD = 0.0, 0.20
SM_CLOCK_IDLE_MHZ, SM_CLOCK_MAX_MHZ = 345, 1965
FB_USED_MIB = 235_000  # weights + KV cache of a large MoE, mem fraction ~0.85 of a 288 GB board


class GpuProfile:
    def __init__(self, idle_w: float, load_w: float, limit_w: float):
        self.idle_w, self.load_w, self.limit_w = idle_w, load_w, limit_w
        self.throttled_ns = 0
        self.xid = 0  # the last XID error code; 0 = none

    def throttled(self, busy: float) -> bool:
        return busy > 0 and self.idle_w + (self.load_w - self.idle_w) * busy >= self.limit_w

    def capped(self, busy: float) -> float:
        """The load that draws power: `busy`, held where its power would pass the limit."""
        if self.load_w <= self.idle_w or self.idle_w + (self.load_w - self.idle_w) * busy <= self.limit_w:
            return busy
        return max(0.0, (self.limit_w - self.idle_w) / (self.load_w - self.idle_w))

    def sm_clock_mhz(self, busy: float) -> int:
        if busy <= 0:
            return SM_CLOCK_IDLE_MHZ
        return max(SM_CLOCK_IDLE_MHZ, round(SM_CLOCK_MAX_MHZ * min(1.0, self.capped(busy) / busy)))

    def clock_events(self, busy: float) -> int:
        return GPU_IDLE if busy <= 0 else (SW_POWER_CAP if self.throttled(busy) else 0)

    def advance(self, busy: float, dt_ns: int) -> None:
        """`busy` held for `dt_ns` (called before it changes)."""
        if dt_ns > 0 and self.throttled(busy):
            self.throttled_ns += dt_ns

    def violation_ns(self, busy: float, since_change_ns: int) -> int:
        return self.throttled_ns + (max(0, since_change_ns) if self.throttled(busy) else 0)

    def fields(self, busy: float, since_change_ns: int) -> dict[str, float]:
        """DCGM field name -> value now, `since_change_ns` after the last change of `busy`."""
        return {
            "DCGM_FI_DEV_MAX_SM_CLOCK": SM_CLOCK_MAX_MHZ,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": self.clock_events(busy),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(busy, 4),
            "DCGM_FI_PROF_SM_ACTIVE": round(0.9 * busy, 4),
            "DCGM_FI_PROF_SM_OCCUPANCY": round(0.35 * busy, 4),
            "DCGM_FI_PROF_DRAM_ACTIVE": round(DRAM_IDLE + (DRAM_LOAD - DRAM_IDLE) * busy, 4),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(TENSOR_IDLE + (TENSOR_LOAD - TENSOR_IDLE) * busy, 4),
            "DCGM_FI_DEV_POWER_VIOLATION": self.violation_ns(busy, since_change_ns),
            "DCGM_FI_DEV_THERMAL_VIOLATION": 0,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
        }
