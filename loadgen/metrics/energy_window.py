"""A GPU's energy over exactly the cell's window [t0, t1], from readings that do not fall on its edges.

A source keeps, per GPU, the distinct readings (snapshots) near the start and the end of its sampling
(`GpuPowerStats`): each with the bracket (lo, hi] in which the exporter collected it (hi = the first scrape
that saw it, lo = the scrape before, which still saw the previous value; lo is None for the first one).

Collection time of a snapshot (`collection_times`): dcgm-exporter collects every `-c` ms on a ticker. A
snapshot whose bracket is narrow (the source polled fast at the cell's edges) was collected one refresh period
after the one before it; the period comes from those pairs (`refresh_period_ns`), and each stretch of such
consecutive collections is dated on a grid fitted to their brackets. Other snapshots are dated at hi, which
is right for a source whose readings are fresh (NVML). An exporter that refreshes about as fast as the edge
polls or faster (every estimate under MAX_PRECISE_NS; period `FRESH`) serves readings at most one of its short
periods old: every snapshot is dated at hi. Dating those at their bracket's middle instead put the load step
at a cell's start up to half a bracket early and over-counted a 0.3 s cell by 2-5 %.

Energy over [t0, t1] (`window_energy_j`) = the energy between the first and the last snapshot (the counter's
delta, restarts handled, or the power integral) − the part before t0 − the part after t1. Each part is cut
inside the snapshot interval [a, b] that holds the edge: its increment ΔE (counter delta, or the trapezoid
of power) is split at the edge in proportion to the power read at each end times the time on each side,
x = P_a · (t − t_a), y = P_b · (t_b − t), share before the edge = x / (x + y). That is linear interpolation
when power is steady, and exact when the load steps at the edge (a cell's load starts and stops there). An
edge outside the snapshots is extrapolated at the nearest snapshot's power.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.names import EnergyMethod

MAX_PRECISE_NS = 60_000_000  # a bracket this narrow holds one collection of any exporter refreshing slower
ONE_COLLECTION = 0.9  # a bracket under 0.9 periods holds exactly one collection, whatever the phase
STEADY_POWER = 0.02  # two power readings within 2 % of each other: the power held steady between them
FRESH = 0  # refresh_period_ns for an exporter refreshing about as fast as it is polled, or faster
Snapshot = Sequence  # [lo ns | None, hi ns, energy mJ | None, power W | None]
Point = tuple[int, float | None, float | None]  # (collection ns, energy mJ, power W)


def _narrow(s: Snapshot) -> bool:
    return s[0] is not None and s[1] - s[0] <= MAX_PRECISE_NS


def _middle(s: Snapshot) -> int:
    return (s[0] + s[1]) // 2


def _steady_power(a: Snapshot, b: Snapshot) -> bool:
    return bool(a[3] and b[3]) and abs(a[3] - b[3]) <= STEADY_POWER * max(a[3], b[3])


def refresh_period_ns(runs: Sequence[Sequence[Snapshot]]) -> int | None:
    """The exporter's refresh period (ns); FRESH when it is under MAX_PRECISE_NS (a bracket that narrow then
    holds several collections, so the estimates only say "as fast as the polls"); None when the snapshots do
    not tell.

    A snapshot with a narrow bracket was collected exactly one period after the one before it (no collection
    fell between the scrape that still saw the previous value and the collection it shows, and the bracket is
    shorter than a period). Each such pair gives one estimate: ΔE / P̄ (counter delta over the mean of the two
    power readings) where the power held steady, else the gap between the two brackets' middles when both are
    narrow. The period is the median of the estimates."""
    estimates = []
    for snaps in runs:
        for a, b in zip(snaps, snaps[1:]):
            if not _narrow(b):
                continue
            if a[2] is not None and b[2] is not None and b[2] > a[2] and _steady_power(a, b):
                estimates.append((b[2] - a[2]) / 1000 / ((a[3] + b[3]) / 2) * 1e9)
            elif _narrow(a):
                estimates.append(_middle(b) - _middle(a))
    if not estimates:
        return None
    period = float(np.median(estimates))
    return int(period) if period > MAX_PRECISE_NS else FRESH


def collection_times(snaps: Sequence[Snapshot], period_ns: int | None) -> list[int]:
    """When the exporter collected each snapshot of one contiguous run of them.

    A snapshot whose bracket is shorter than a period holds the one collection after its predecessor's, so a
    stretch in which every snapshot after the first has such a bracket holds consecutive collections one
    period apart: they are dated c_k = phase + k · period, with the phase fitted to the narrow brackets'
    middles (their mean offset; the middles of all when none is narrow), so one poll's timing error is shared
    out over the stretch. A narrow bracket without a known period is dated at its middle; any other snapshot
    at hi (when it was first seen), and so is every snapshot of a FRESH exporter."""
    if period_ns == FRESH:
        return [s[1] for s in snaps]
    dates = [_middle(s) if _narrow(s) else s[1] for s in snaps]
    if period_ns is None:
        return dates

    def one_period_after(s: Snapshot) -> bool:
        return s[0] is not None and s[1] - s[0] < ONE_COLLECTION * period_ns

    i = 0
    while i < len(snaps):
        j = i
        while j + 1 < len(snaps) and one_period_after(snaps[j + 1]):
            j += 1
        narrow = [k for k in range(i, j + 1) if _narrow(snaps[k])]
        offsets = [_middle(snaps[k]) - (k - i) * period_ns for k in (narrow or range(i + 1, j + 1))]
        if offsets:
            phase = sum(offsets) / len(offsets)
            dates[i:j + 1] = [int(phase + (k - i) * period_ns) for k in range(i, j + 1)]
        i = j + 1
    return dates


def _increment_j(a: Point, b: Point, counter: bool) -> float | None:
    if counter:
        return None if a[1] is None or b[1] is None or b[1] < a[1] else (b[1] - a[1]) / 1000
    if a[2] is None or b[2] is None:
        return None
    return (a[2] + b[2]) / 2 * (b[0] - a[0]) / 1e9


def _share_before(a: Point, b: Point, t: int) -> float:
    x = (a[2] or 0.0) * (t - a[0])
    y = (b[2] or 0.0) * (b[0] - t)
    return x / (x + y) if x + y > 0 else (t - a[0]) / (b[0] - a[0])


def energy_before_j(points: Sequence[Point], t: int, counter: bool) -> float | None:
    """Energy from the first snapshot to `t` (J; negative when t is before it), None when `t` is past the
    last snapshot given or an increment is unknown (a counter restart)."""
    first = points[0]
    if t <= first[0]:
        return None if first[2] is None else -first[2] * (first[0] - t) / 1e9
    done = 0.0
    for a, b in zip(points, points[1:]):
        inc = _increment_j(a, b, counter)
        if inc is None:
            return None
        if t <= b[0]:
            return done + inc * _share_before(a, b, t)
        done += inc
    return None


def energy_after_j(points: Sequence[Point], t: int, counter: bool) -> float | None:
    """Energy from `t` to the last snapshot (J; negative when t is after it); None as `energy_before_j`."""
    mirrored = [(-p[0], None if p[1] is None else -p[1], p[2]) for p in reversed(points)]
    return energy_before_j(mirrored, -t, counter)


def window_energy_j(gpu: dict, t0_ns: int, t1_ns: int) -> float | None:
    """One GPU's energy over [t0, t1] from its figures (`energy_j`, `energy_method`, `edge_points`: the head
    and the tail snapshots with their collection times); None when the snapshots do not reach the edges."""
    head, tail = gpu.get("edge_points_head"), gpu.get("edge_points_tail")
    if gpu.get("energy_j") is None or not head or not tail:
        return None
    counter = gpu.get("energy_method") is EnergyMethod.COUNTER
    before = energy_before_j([tuple(p) for p in head], t0_ns, counter)
    after = energy_after_j([tuple(p) for p in tail], t1_ns, counter)
    if before is None or after is None:
        return None
    return gpu["energy_j"] - before - after
