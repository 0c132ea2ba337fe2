"""A cell's GPU activity figures: each GPU's readings cut to the cell's window (`gpu_activity.window_mean`),
and the total over the GPUs.

Per GPU (all time-weighted means over [t0, t1]):
- utilization_percent: DCGM_FI_DEV_GPU_UTIL / NVML utilization.gpu (% of time a kernel ran).
- sm_clock_mhz; sm_clock_fraction = sm_clock_mhz / sm_clock_max_mhz (the GPU's maximum SM clock).
- gr_engine_active, sm_active, sm_occupancy, tensor_active, dram_active: DCGM profiling ratios (0..1).
- memory_used_mib: framebuffer used.
- power_cap_fraction, thermal_fraction, hw_slowdown_fraction: share of the window a clock-event reason of
  that group was set (`gpu_activity.REASON_GROUPS`).
- power_violation_s, thermal_violation_s: time throttled in the window (the counters' increase);
  power_violation_fraction = power_violation_s / (t1 − t0).
Total: the mean over the GPUs that served a figure, except memory_used_mib and the violation seconds, which
are summed. A figure no GPU served is absent from both, and `unavailable` says why.
"""

from __future__ import annotations

from typing import Any

from loadgen.metrics.gpu_activity import COUNTERS, GAUGES, NS_PER_S, REASON_GROUPS, window_integral, window_mean

SUMMED = ("memory_used_mib", "power_violation_s", "thermal_violation_s")
FIGURE_FIELDS = {  # figure -> the served field it needs (names of gpu_activity.FIELDS)
    **{g: g for g in GAUGES if g != "sm_clock_max_mhz"},
    "sm_clock_fraction": "sm_clock_max_mhz",
    **{f"{group}_fraction": "clock_events" for group in REASON_GROUPS},
    "power_violation_s": "power_violation_ns", "power_violation_fraction": "power_violation_ns",
    "thermal_violation_s": "thermal_violation_ns",
}


def _counter_s(series: dict | None, t0: int, t1: int) -> float | None:
    if series is None:
        return None
    if not series["n"]:
        return 0.0 if t1 > t0 else None  # served, never read twice: no time measured (the cell was too short)
    integral = window_integral(series, t0, t1)  # ns of throttling per ns, times ns
    return None if integral is None else max(0.0, integral) / NS_PER_S


def gpu_figures(series: dict[str, dict], t0_ns: int, t1_ns: int) -> dict[str, float]:
    """One GPU's figures over [t0, t1] from its series JSON (`GpuActivityStats.to_json`); only those served."""
    out: dict[str, float] = {}
    for name in GAUGES:
        value = window_mean(series.get(name), t0_ns, t1_ns)
        if value is not None:
            out[name] = value
    for group in REASON_GROUPS:
        value = window_mean(series.get(group), t0_ns, t1_ns)
        if value is not None:
            out[f"{group}_fraction"] = value
    for name in COUNTERS:
        value = _counter_s(series.get(name), t0_ns, t1_ns)
        if value is not None:
            out[name.replace("_ns", "_s")] = value
    if out.get("sm_clock_mhz") and out.get("sm_clock_max_mhz"):
        out["sm_clock_fraction"] = out["sm_clock_mhz"] / out["sm_clock_max_mhz"]
    if "power_violation_s" in out and t1_ns > t0_ns:
        out["power_violation_fraction"] = min(1.0, out["power_violation_s"] * NS_PER_S / (t1_ns - t0_ns))
    return out


def total_figures(per_gpu: list[dict[str, Any]]) -> dict[str, float]:
    """Over the GPUs: the sum of SUMMED figures, the mean of the others (over the GPUs that served each)."""
    names = [n for n in FIGURE_FIELDS if any(n in g for g in per_gpu)]
    out = {}
    for name in ("sm_clock_max_mhz", *names):
        values = [g[name] for g in per_gpu if name in g]
        if values:
            out[name] = float(sum(values)) if name in SUMMED else sum(values) / len(values)
    return out


def cell_activity(source: str, gpus: list[dict[str, Any]], window_ns: dict | None,
                  reasons: dict[str, str]) -> dict[str, Any] | None:
    """{source, gpus, total, per_gpu, unavailable} for the cell's window from the source's GPUs (each with
    its identity and `series`); `reasons` says why the source lacks a field (field -> reason). None without
    the window's edges."""
    if not window_ns or window_ns.get("start_ns") is None or window_ns.get("end_ns") is None:
        return None
    t0, t1 = window_ns["start_ns"], window_ns["end_ns"]
    per_gpu = [{k: v for k, v in g.items() if k != "series"} | gpu_figures(g["series"], t0, t1) for g in gpus]
    unavailable = {figure: reasons.get(needs, f"the source served no {needs}")
                   for figure, needs in FIGURE_FIELDS.items() if not any(figure in g for g in per_gpu)}
    return {"source": source, "gpus": len(per_gpu), "total": total_figures(per_gpu), "per_gpu": per_gpu,
            "unavailable": unavailable}
