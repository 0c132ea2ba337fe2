"""The simulated GPUs' profiling and health fields: DRAM and tensor-pipe activity, throttle time, XID.

LLM decoding streams the weights and the KV cache for every token, so under load the memory interface is
busy while the tensor pipes mostly wait: DRAM activity rises to ~0.8 of cycles, tensor activity to ~0.2 (the
"memory-bound" picture the dashboards' stat recognises). A GPU is power-throttled while its power would
reach the limit; the counter accumulates that time in ns, as current DCGM does. No thermal throttling and
no XID error unless a test sets `xid`.
"""

from __future__ import annotations

DRAM_IDLE, DRAM_LOAD = 0.02, 0.80
TENSOR_IDLE, TENSOR_LOAD = 0.0, 0.20


class GpuProfile:
    def __init__(self, idle_w: float, load_w: float, limit_w: float):
        self.idle_w, self.load_w, self.limit_w = idle_w, load_w, limit_w
        self.throttled_ns = 0
        self.xid = 0  # the last XID error code; 0 = none

    def throttled(self, u: float) -> bool:
        return self.idle_w + (self.load_w - self.idle_w) * u >= self.limit_w

    def advance(self, u: float, dt_ns: int) -> None:
        """`u` held for `dt_ns` (called before the utilisation changes)."""
        if dt_ns > 0 and self.throttled(u):
            self.throttled_ns += dt_ns

    def fields(self, u: float, since_change_ns: int) -> dict[str, float]:
        """DCGM field name -> value now, `since_change_ns` after the last utilisation change."""
        throttled_ns = self.throttled_ns + (max(0, since_change_ns) if self.throttled(u) else 0)
        return {
            "DCGM_FI_PROF_DRAM_ACTIVE": round(DRAM_IDLE + (DRAM_LOAD - DRAM_IDLE) * u, 4),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(TENSOR_IDLE + (TENSOR_LOAD - TENSOR_IDLE) * u, 4),
            "DCGM_FI_DEV_POWER_VIOLATION": throttled_ns,
            "DCGM_FI_DEV_THERMAL_VIOLATION": 0,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
        }
