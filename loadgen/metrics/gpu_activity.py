"""How busy a GPU was over exactly the cell's window: utilization, SM clock, DCGM profiling ratios, memory
used, time at a clock-event (throttle) reason, violation time. Pure arithmetic, shared by the DCGM and NVML
sources (which fold readings into `GpuActivityStats`) and the cell builder (which cuts them at the window's
edges with `window_figures`).

A reading (t_k, v_k) describes the time just before it: utilization and the profiling ratios are averages
over the sensor's last period, and an exporter serves what it collected up to one refresh period earlier. So
v_k holds over (s_k, t_k] with s_k = t_k − min(t_k − t_{k−1}, hold), and the reading before, v_{k−1}, over the
rest of the interval, (t_{k−1}, s_k]. `hold` is the source's: the exporter's refresh period (DCGM), NVML's
sample period, 0 for values read fresh (then each reading holds forward until the next one), unbounded for a
counter's rate (an average over its whole interval). Before the first reading its value is extended back,
after the last one the last value forward. The time-weighted mean over [t0, t1] is

    mean = ∫_{t0}^{t1} v(t) dt / (t1 − t0),

computed as the running integral over [t_first, t_last] minus the parts before t0 and after t1, which are
cut inside the first and last `EDGE_READINGS` readings (kept; the rest is summed), as a cell's energy is.
A clock-event reason is a 0/1 series (the reason bit set in the reading), so its mean is the fraction of the
window the GPU spent at it. A violation counter (time throttled since boot) becomes a series of rates
Δc / Δt, each held over its interval, so its integral over the window is the throttled time in it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

EDGE_READINGS = 8
NS_PER_S = 1e9

# NVML / DCGM clock-event ("throttle") reason bits (nvmlClocksEventReason*, DCGM_CLOCKS_EVENT_REASON_*)
GPU_IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80
REASON_GROUPS = {  # reported fraction -> the bits that count for it
    "power_cap": SW_POWER_CAP | HW_POWER_BRAKE,
    "thermal": SW_THERMAL | HW_THERMAL,
    "hw_slowdown": HW_SLOWDOWN,
}
GAUGES = ("utilization_percent", "sm_clock_mhz", "sm_clock_max_mhz", "gr_engine_active", "sm_active", "sm_occupancy",
          "tensor_active", "dram_active", "memory_used_mib")
COUNTERS = ("power_violation_ns", "thermal_violation_ns")  # time throttled since boot, ns
FIELDS = (*GAUGES, "clock_events", *COUNTERS)  # what a source may serve ("clock_events": the reason bitmask)


class HeldSeries:
    """One quantity's readings over a window: a running integral and the first and last EDGE_READINGS points
    [t, v, s] (v held over (s, t], the value before over (t_prev, s]; module docstring)."""

    __slots__ = ("head", "integral", "n", "tail")

    def __init__(self) -> None:
        self.n = 0
        self.integral = 0.0  # ∫ v dt over [t_first, t_last], value·ns
        self.head: list[tuple[int, float, int]] = []
        self.tail: deque[tuple[int, float, int]] = deque(maxlen=EDGE_READINGS)

    def add(self, t_ns: int, value: float, hold_ns: float | None = None) -> None:
        """A reading; `hold_ns` None: it describes its whole interval (a counter's rate)."""
        if self.tail and t_ns <= self.tail[-1][0]:
            return  # out of order or a duplicate time: the integral stays monotonic in time
        self.n += 1
        if not self.tail:
            point = (t_ns, value, t_ns)
            self.tail.append(point)
            self.head.append(point)
            return
        last = self.tail[-1]
        span = t_ns - last[0]
        point = (t_ns, value, t_ns - int(span if hold_ns is None else min(span, hold_ns)))
        self.integral += _full(last, point)
        if last[1] == value and len(self.tail) > 1:
            # the same value again extends the last interval (its split kept): the edges keep EDGE_READINGS
            # changes, however fast a source polls an exporter that refreshes slowly
            point = (t_ns, value, last[2])
            self.tail[-1] = point
            if self.head[-1] is last:
                self.head[-1] = point
            return
        self.tail.append(point)
        if len(self.head) < EDGE_READINGS:
            self.head.append(point)

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "integral": self.integral, "head": [list(p) for p in self.head],
                "tail": [list(p) for p in self.tail]}


def _partial(a, b, x: int) -> float:
    """∫ from a's time to x ≤ b's time, inside the interval between readings a and b."""
    return a[1] * (min(x, b[2]) - a[0]) + b[1] * max(0, x - b[2])


def _full(a, b) -> float:
    return _partial(a, b, b[0])


def _before(head: list, t0: int) -> float | None:
    """∫ from the first reading to t0 (negative when t0 is before it); None when t0 is past the head."""
    if t0 <= head[0][0]:
        return -head[0][1] * (head[0][0] - t0)
    done = 0.0
    for a, b in zip(head, head[1:]):
        if t0 <= b[0]:
            return done + _partial(a, b, t0)
        done += _full(a, b)
    return None


def _after(tail: list, t1: int) -> float | None:
    """∫ from t1 to the last reading (negative when t1 is after it); None when t1 is before the tail."""
    if t1 >= tail[-1][0]:
        return -tail[-1][1] * (t1 - tail[-1][0])
    done = 0.0
    for a, b in zip(reversed(tail[:-1]), reversed(tail[1:])):
        if t1 >= a[0]:
            return done + _full(a, b) - _partial(a, b, t1)
        done += _full(a, b)
    return None


def window_integral(series: dict[str, Any], t0_ns: int, t1_ns: int) -> float | None:
    """∫ v dt over [t0, t1] (value·ns) from a series' JSON (`HeldSeries.to_json`); None when it holds no
    reading. An edge that falls outside the kept edge readings (a window far inside the readings) takes the
    mean over all readings for the window instead."""
    if not series or not series["n"]:
        return None
    before, after = _before(series["head"], t0_ns), _after(series["tail"], t1_ns)
    if before is None or after is None:
        span = series["tail"][-1][0] - series["head"][0][0]
        mean = series["integral"] / span if span > 0 else series["tail"][-1][1]
        return mean * (t1_ns - t0_ns)
    return series["integral"] - before - after


def window_mean(series: dict[str, Any] | None, t0_ns: int, t1_ns: int) -> float | None:
    """The time-weighted mean over [t0, t1] (module docstring); None as `window_integral`, or for an empty window."""
    if series is None or t1_ns <= t0_ns:
        return None
    integral = window_integral(series, t0_ns, t1_ns)
    return None if integral is None else integral / (t1_ns - t0_ns)


class GpuActivityStats:
    """One GPU's activity readings: `add(t_ns, {field: value}, hold_ns)` with the names of `FIELDS`; `hold_ns`
    how far back a reading reaches (module docstring)."""

    def __init__(self) -> None:
        self.series: dict[str, HeldSeries] = {}
        self._last_count: dict[str, tuple[int, float]] = {}

    def _put(self, name: str, t_ns: int, value: float, hold_ns: float | None) -> None:
        self.series.setdefault(name, HeldSeries()).add(t_ns, value, hold_ns)

    def add(self, t_ns: int, readings: dict[str, float], hold_ns: float = 0) -> None:
        for name, value in readings.items():
            if name in GAUGES:
                self._put(name, t_ns, float(value), hold_ns)
            elif name == "clock_events":
                for group, bits in REASON_GROUPS.items():
                    self._put(group, t_ns, 1.0 if int(value) & bits else 0.0, hold_ns)
            elif name in COUNTERS:
                self._count(name, t_ns, float(value))

    def _count(self, name: str, t_ns: int, value: float) -> None:
        last = self._last_count.get(name)
        self._last_count[name] = (t_ns, value)
        if last is None:
            self.series.setdefault(name, HeldSeries())  # served, though no interval yet
        elif t_ns > last[0] and value >= last[1]:  # a lower value: the counter restarted, that interval is lost
            self._put(name, t_ns, (value - last[1]) / (t_ns - last[0]), None)

    def to_json(self) -> dict[str, Any]:
        """{quantity: series JSON}; a clock-event group or a counter appears once the source served it."""
        return {name: s.to_json() for name, s in self.series.items()}
