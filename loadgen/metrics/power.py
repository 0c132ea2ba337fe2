"""Power and energy figures for one cell: pure arithmetic, shared by the DCGM and NVML sources.

`GpuPowerStats` folds one GPU's readings into running sums (constant memory, however long the cell);
`summarize_power` turns the per-GPU figures into a cell's `power` values; `derive_power` adds the
per-token figures once the cell's output tokens are known. Units are in the names: W, J, mJ, s, ns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from loadgen.metrics.energy_window import window_energy_j
from loadgen.names import EnergyMethod

EDGE_SNAPSHOTS = 8  # distinct readings kept at each end of the window, to cut its energy at the cell's edges
STALE_AFTER_S = 2.0  # a reading unchanged this long means the exporter refreshes slower than we sample


class GpuPowerStats:
    """Running power/energy figures of one GPU over one window, from readings (t_ns, power_w, energy_mj).

    - `integral_j` = Σ (P_prev + P) / 2 · Δt over consecutive readings (trapezoid, J).
    - energy counter: E = Σ over counter segments (last − first) / 1000 (J). A reading lower than the one
      before means the counter restarted at 0 (driver reload, exporter restart): the segment before is
      closed, and the interval Δt that straddles the restart is counted as c + P_before · (Δt − c / P_after),
      with c the new reading (drawn since the restart, so the restart was c / P_after before it) and
      P_before, P_after the power read at the interval's two ends; just c when either is unknown.
    - unchanged runs: the longest time the (power, energy) reading stayed identical; real sensors move
      every few ms, so a long run means the source is serving a cached value.
    - snapshots: the first and the last few distinct readings [lo, hi, energy_mj, power_w] (first seen at
      hi, the reading before at lo), from which `energy_window` cuts the energy to the cell's edges.
    """

    __slots__ = (
        "e_done_mj",
        "e_first_mj",
        "e_last_mj",
        "e_readings",
        "head",
        "integral_j",
        "last_key",
        "limit_w",
        "longest_unchanged_ns",
        "max_w",
        "n",
        "p_at_e_w",
        "p_last_w",
        "resets",
        "t_e_ns",
        "t_first_ns",
        "t_last_ns",
        "tail",
        "unchanged_since_ns",
    )

    def __init__(self) -> None:
        self.n = 0
        self.t_first_ns: int | None = None
        self.t_last_ns: int | None = None
        self.p_last_w: float | None = None
        self.max_w: float | None = None
        self.integral_j = 0.0
        self.limit_w: float | None = None
        self.e_readings = 0
        self.e_first_mj = 0.0  # start of the current counter segment
        self.e_last_mj = 0.0
        self.e_done_mj = 0.0  # energy of the closed segments
        self.t_e_ns = 0  # when the counter was last read
        self.p_at_e_w: float | None = None  # power read with it
        self.resets = 0
        self.last_key: tuple | None = None
        self.unchanged_since_ns = 0
        self.longest_unchanged_ns = 0
        self.head: list[list] = []
        self.tail: deque[list] = deque(maxlen=EDGE_SNAPSHOTS)

    def add(self, t_ns: int, power_w: float | None, energy_mj: float | None = None,
            limit_w: float | None = None) -> None:
        if limit_w is not None:
            self.limit_w = limit_w
        if power_w is None and energy_mj is None:
            return
        if self.t_last_ns is not None and t_ns <= self.t_last_ns:
            return  # out-of-order or duplicate reading: keep the integral monotonic in time
        if power_w is not None:
            if self.p_last_w is not None and self.t_last_ns is not None:
                self.integral_j += (self.p_last_w + power_w) / 2 * (t_ns - self.t_last_ns) / 1e9
            self.p_last_w = power_w
            self.max_w = power_w if self.max_w is None else max(self.max_w, power_w)
        if energy_mj is not None:
            self._add_energy(t_ns, energy_mj, power_w)
        if (power_w, energy_mj) != self.last_key:
            snapshot = [self.t_last_ns, t_ns, energy_mj, power_w]
            self.tail.append(snapshot)
            if len(self.head) < EDGE_SNAPSHOTS:
                self.head.append(snapshot)
        self._track_unchanged(t_ns, (power_w, energy_mj))
        if self.t_first_ns is None:
            self.t_first_ns = t_ns
        self.t_last_ns = t_ns
        self.n += 1

    def _add_energy(self, t_ns: int, energy_mj: float, power_w: float | None) -> None:
        if self.e_readings == 0:
            self.e_first_mj = self.e_last_mj = energy_mj
        elif energy_mj < self.e_last_mj:
            straddle_mj = energy_mj
            if power_w and self.p_at_e_w is not None:
                after_s = energy_mj / 1000 / power_w
                straddle_mj += self.p_at_e_w * max(0.0, (t_ns - self.t_e_ns) / 1e9 - after_s) * 1000
            self.e_done_mj += self.e_last_mj - self.e_first_mj + straddle_mj
            self.e_first_mj = self.e_last_mj = energy_mj
            self.resets += 1
        else:
            self.e_last_mj = energy_mj
        self.e_readings += 1
        self.t_e_ns, self.p_at_e_w = t_ns, power_w

    def _track_unchanged(self, t_ns: int, key: tuple) -> None:
        if key != self.last_key:
            self.last_key = key
            self.unchanged_since_ns = t_ns
        else:
            self.longest_unchanged_ns = max(self.longest_unchanged_ns, t_ns - self.unchanged_since_ns)

    @property
    def covered_s(self) -> float:
        """Time between the first and the last reading (s)."""
        if self.t_first_ns is None or self.t_last_ns is None:
            return 0.0
        return (self.t_last_ns - self.t_first_ns) / 1e9

    @property
    def never_changed(self) -> bool:
        """Three or more readings, all identical: the source never refreshed during the window."""
        if self.t_first_ns is None or self.t_last_ns is None:
            return False
        return self.n >= 3 and self.longest_unchanged_ns >= self.t_last_ns - self.t_first_ns

    def edge_points(self, dates: Callable[[list], list[int]] | None) -> dict[str, list]:
        """The head and tail snapshots as [collection ns, energy mJ, power W]; `dates(snapshots)` dates a run
        of snapshots (None: each at hi, for fresh readings and for the power integral, which runs over
        reading times)."""
        counter = self.e_readings >= 2
        date = dates if dates is not None and counter else (lambda snaps: [s[1] for s in snaps])
        head = [[t, e, p] for t, (_, _, e, p) in zip(date(self.head), self.head)]
        tail = [[t, e, p] for t, (_, _, e, p) in zip(date(list(self.tail)), self.tail)]
        if not counter and tail and self.t_last_ns > tail[-1][0]:
            tail.append([self.t_last_ns, None, self.p_last_w])  # the integral runs to the last reading
        return {"edge_points_head": head, "edge_points_tail": tail}

    def figures(self, dates: Callable[[list], list[int]] | None = None) -> dict[str, Any]:
        """This GPU's figures: mean_w = integral_j / covered_s (time-weighted; the one reading if only one),
        max_w, limit_w, energy_j (counter when read twice or more, else the trapezoid integral), and the
        edge snapshots (`edge_points`, dated by `dates`)."""
        covered_s = self.covered_s
        mean_w = self.integral_j / covered_s if covered_s > 0 and self.integral_j > 0 else self.p_last_w
        if self.e_readings >= 2:
            energy_j, method = (self.e_done_mj + self.e_last_mj - self.e_first_mj) / 1000, EnergyMethod.COUNTER
        elif self.n >= 2 and self.p_last_w is not None:
            energy_j, method = self.integral_j, EnergyMethod.INTEGRATED
        else:
            energy_j, method = None, None
        return {
            "mean_w": mean_w,
            "max_w": self.max_w,
            "limit_w": self.limit_w,
            "energy_j": energy_j,
            "energy_method": method,
            "energy_integrated_j": self.integral_j if self.n >= 2 and self.p_last_w is not None else None,
            "samples": self.n,
            "covered_s": covered_s,
            "counter_resets": self.resets,
            "longest_unchanged_s": self.longest_unchanged_ns / 1e9,
            **self.edge_points(dates),
        }


def _sum_or_none(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else float(sum(values))


def summarize_power(source: str, per_gpu: list[dict[str, Any]], max_w_total: float | None,
                    window_s: float) -> dict[str, Any]:
    """A cell's power values from its per-GPU figures.

    mean_w_total = Σ mean_w (W); max_w_total is the highest per-sampling-round total (passed in);
    energy_j = Σ energy_j (J); limit_w_total = Σ limit_w (W, None unless every GPU reported one);
    power_fraction_of_limit = mean_w_total / limit_w_total; energy_coverage = Σ covered_s / (gpus · window_s).
    """
    methods = {g["energy_method"] for g in per_gpu if g["energy_method"]}
    limit_w_total = _sum_or_none([g["limit_w"] for g in per_gpu])
    mean_w_total = _sum_or_none([g["mean_w"] for g in per_gpu])
    coverage = None
    if per_gpu and window_s > 0:
        coverage = min(1.0, sum(g["covered_s"] for g in per_gpu) / (len(per_gpu) * window_s))
    return {
        "source": source,
        "gpus": len(per_gpu),
        "mean_w_total": mean_w_total,
        "max_w_total": max_w_total,
        "per_gpu": per_gpu,
        "energy_j": _sum_or_none([g["energy_j"] for g in per_gpu]),
        "energy_method": methods.pop() if len(methods) == 1 else (EnergyMethod.MIXED if methods else None),
        "limit_w_total": limit_w_total,
        "power_fraction_of_limit": (mean_w_total / limit_w_total
                                    if mean_w_total is not None and limit_w_total else None),
        "window_s": window_s,
        "energy_coverage": coverage,
    }


def cell_energy_j(values: dict[str, Any], duration_s: float, window_ns: dict | None = None) -> float | None:
    """Energy drawn over the cell's measured window (J).

    With the window's edges (`window_ns` {start_ns, end_ns}) and every GPU's edge snapshots, each GPU's
    energy is cut at exactly those edges (`energy_window.window_energy_j`). Otherwise each GPU's measured
    energy is scaled from the span its readings cover to the cell's duration:
    E_cell = Σ_gpu energy_j · duration_s / covered_s. When sampling brackets the cell this is energy_j
    within a percent; when a node stopped answering mid-cell it extrapolates that node's GPUs at the
    power they drew while it answered, instead of silently counting them as drawing nothing.
    Falls back to `energy_j` unchanged when per-GPU spans are missing.
    """
    per_gpu = values.get("per_gpu") or []
    t0, t1 = (window_ns or {}).get("start_ns"), (window_ns or {}).get("end_ns")
    if per_gpu and t0 is not None and t1 is not None:
        cut = [window_energy_j(g, t0, t1) for g in per_gpu]
        known = [e for e in cut if e is not None]
        if len(known) == len(cut):
            return float(sum(known))
    if duration_s > 0 and per_gpu and all(g.get("energy_j") is not None and g.get("covered_s") for g in per_gpu):
        return sum(g["energy_j"] * duration_s / g["covered_s"] for g in per_gpu)
    return values.get("energy_j")


def derive_power(values: dict[str, Any], output_tokens: int, duration_s: float,
                 window_ns: dict | None = None) -> dict[str, Any]:
    """The cell's `power` dict: `values` plus the per-token figures.

    - cell_energy_j: see `cell_energy_j` (J over the cell's window `window_ns`, else its `duration_s`).
    - j_per_output_token = cell_energy_j / output_tokens (J/token).
    - output_tokens_per_j = output_tokens / cell_energy_j (tokens/J).
    Both are None when the energy or the token count is missing or zero.
    """
    out = dict(values)
    energy_j = cell_energy_j(values, duration_s, window_ns)
    out["cell_energy_j"] = energy_j
    if energy_j is not None and energy_j > 0 and output_tokens and output_tokens > 0:
        out["j_per_output_token"], out["output_tokens_per_j"] = energy_j / output_tokens, output_tokens / energy_j
    else:
        out["j_per_output_token"], out["output_tokens_per_j"] = None, None
    return out
