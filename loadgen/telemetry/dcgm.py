"""GPU power per cell from NVIDIA dcgm-exporter, one `/metrics` URL per node.

`DcgmSource(urls, interval_s=1.0)` scrapes every URL concurrently each `interval_s` during the cell and
keeps, per GPU (node URL + `gpu` + `UUID`), only running sums (`loadgen.metrics.power.GpuPowerStats`), so
memory does not grow with the cell's length. Figures (formulas in `loadgen.metrics.power.summarize_power`):

- power: `DCGM_FI_DEV_POWER_USAGE` (W); mean is time-weighted over the readings, max is the highest reading.
- energy: Δ`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ counter since boot) over the window, restarts handled;
  without the counter, the trapezoid integral of power over time (`energy_method` says which).
- limit: `DCGM_FI_DEV_ENFORCED_POWER_LIMIT`, else `DCGM_FI_DEV_POWER_MGMT_LIMIT` (W). Neither is in
  dcgm-exporter's default CSV: add them to a custom one (`-f`) to get power as a fraction of the limit.

Warnings: a node that stopped answering (which URL, since when; its data from before is kept), values
unchanged between samples (dcgm-exporter collects every 30 s by default: run it with `-c 1000` or less),
DCGM blank sentinels (values ≥ 1e18 for fields a GPU does not support, ignored).

Edges: dcgm-exporter serves the values of its last collection (every `-c` ms), so a scrape's values are up
to that old. At the start of a cell the source polls every EDGE_POLL_S until each node's values changed three
times, each between two quick polls (at most EDGE_START_MAX_S), which tells the exporter's refresh period; at
the stop it polls until they change once more between two quick polls (at most 2.5 refresh periods). The
snapshots are dated on that grid and the energy is cut at the cell's exact edges
(`loadgen.metrics.energy_window`).

The exporter's metric names, labels and text format (parsing and rendering) are in `dcgm_format`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from loadgen.aio import cancel_and_wait
from loadgen.metrics.energy_window import MAX_PRECISE_NS, collection_times, refresh_period_ns
from loadgen.metrics.gpu_activity import GpuActivityStats
from loadgen.metrics.power import STALE_AFTER_S, GpuPowerStats, summarize_power
from loadgen.names import EnergyMethod
from loadgen.telemetry.base import PeriodicSampler, SourceResult
from loadgen.telemetry.dcgm_format import ENERGY, ENFORCED_LIMIT, MGMT_LIMIT, POWER, missing_reasons, parse_dcgm

EDGE_POLL_S = 0.02
EDGE_START_MAX_S = 3.5


def normalize_url(url: str) -> str:
    """`host:9400` → `http://host:9400/metrics`; a URL with a path is kept as given."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    return url.rstrip("/") + "/metrics" if parts.path in ("", "/") else url


@dataclass
class _Node:
    url: str
    ok: int = 0
    failed: int = 0
    failing_since_ns: int | None = None  # first failure after the last success
    last_error: str | None = None
    blank_fields: set[str] = field(default_factory=set)
    skipped_lines: int = 0
    signature: tuple | None = None  # the values of the last answer
    sharp_changes: int = 0  # answers whose values differed from an answer at most MAX_PRECISE_NS before
    last_answer_ns: int | None = None

    def failure(self, t_ns: int, error: str) -> None:
        self.failed += 1
        self.last_error = error
        if self.failing_since_ns is None:
            self.failing_since_ns = t_ns

    def success(self) -> None:
        self.ok += 1
        self.failing_since_ns = None


@dataclass
class _Gpu:
    node: _Node
    gpu: str
    uuid: str
    hostname: str | None
    model: str | None
    stats: GpuPowerStats = field(default_factory=GpuPowerStats)
    activity: GpuActivityStats = field(default_factory=GpuActivityStats)


class DcgmSource(PeriodicSampler):
    """Samples dcgm-exporter endpoints during a cell; `values` documented in the module docstring."""

    name = "dcgm"
    kind = "power"

    def __init__(self, urls: list[str], interval_s: float = 1.0, session: aiohttp.ClientSession | None = None,
                 timeout_s: float | None = None):
        super().__init__(interval_s)
        self._nodes = [_Node(normalize_url(u)) for u in urls]
        self._session = session
        self._own_session = session is None
        # a hung node must not hold the others' sampling for long
        self.timeout_s = timeout_s if timeout_s is not None else max(0.2, min(2.0, interval_s))
        self._gpus: dict[tuple[str, str, str], _Gpu] = {}
        self.max_w_total: float | None = None

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        await super().start()

    async def _loop(self) -> None:
        # three collections seen between two quick polls each: the period to a few ms
        await self._poll_until(lambda: all(n.sharp_changes >= 3 for n in self._nodes), EDGE_START_MAX_S)
        await super()._loop()

    async def _poll_until(self, done, max_s: float) -> None:
        """Sample every EDGE_POLL_S until `done()` or `max_s` have passed."""
        deadline = time.monotonic() + max_s
        while not done() and time.monotonic() < deadline:
            await asyncio.sleep(EDGE_POLL_S)
            await self._safe_sample()

    def _period_ns(self, node: _Node) -> int | None:
        """The node's refresh period (ns) from its first GPU's snapshots."""
        gpu = next((g for g in self._gpus.values() if g.node is node), None)
        return None if gpu is None else refresh_period_ns([gpu.stats.head, list(gpu.stats.tail)])

    def _hold_ns(self, node: _Node) -> float:
        """How far back a reading reaches: the node's refresh period; 0 for an exporter that refreshes about as
        fast as it is polled (FRESH); one sampling interval while the period is not known (gpu_activity)."""
        period = self._period_ns(node)
        return self.interval_s * 1e9 if period is None else period

    async def stop(self) -> SourceResult:
        await cancel_and_wait(self._task)
        self._task = None
        seen = [n.sharp_changes for n in self._nodes]
        periods = [ns / 1e9 for n in self._nodes if (ns := self._period_ns(n)) is not None]
        wait_s = min(EDGE_START_MAX_S, 2.5 * max(periods)) if len(periods) == len(self._nodes) else 0.0
        await self._poll_until(lambda: all(n.sharp_changes > k for n, k in zip(self._nodes, seen)), wait_s)
        try:
            return await super().stop()
        finally:
            if self._own_session and self._session is not None:
                await self._session.close()
                self._session = None

    async def sample(self, t_ns: int) -> None:
        totals = await asyncio.gather(*(self._scrape(node) for node in self._nodes))
        answered = [w for w in totals if w is not None]
        if answered:
            round_w = sum(answered)
            self.max_w_total = round_w if self.max_w_total is None else max(self.max_w_total, round_w)

    async def _fetch(self, url: str) -> str:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        assert self._session is not None, "sampled between start and stop only"
        async with self._session.get(url, timeout=timeout) as resp:
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status}")
            return await resp.text()

    async def _scrape(self, node: _Node) -> float | None:
        """One scrape of one node; returns the node's total W in this round (None when it failed)."""
        t0 = time.monotonic_ns()
        try:
            text = await self._fetch(node.url)
            t_ns = (t0 + time.monotonic_ns()) // 2  # the exporter answered somewhere in between
            scrape = parse_dcgm(text)
            if not any(r.power_w is not None for r in scrape.readings):
                raise ValueError(f"no {POWER} in the answer (not a dcgm-exporter?)")
        except (TimeoutError, aiohttp.ClientError, ValueError, UnicodeDecodeError) as exc:
            node.failure(t0, f"{type(exc).__name__}: {exc}"[:160] if str(exc) else type(exc).__name__)
            return None
        node.success()
        signature = tuple((r.gpu, r.uuid, r.power_w, r.energy_mj) for r in scrape.readings)
        quick = node.last_answer_ns is not None and t_ns - node.last_answer_ns <= MAX_PRECISE_NS
        node.sharp_changes += signature != node.signature and quick
        node.signature, node.last_answer_ns = signature, t_ns
        node.blank_fields |= scrape.blank_fields
        node.skipped_lines += scrape.skipped_lines
        total_w = 0.0
        hold_ns = self._hold_ns(node)
        for r in scrape.readings:
            gpu = self._gpus.get((node.url, r.gpu, r.uuid))
            if gpu is None:
                gpu = self._gpus[(node.url, r.gpu, r.uuid)] = _Gpu(node, r.gpu, r.uuid, r.hostname, r.model)
            gpu.stats.add(t_ns, r.power_w, r.energy_mj, r.limit_w)
            gpu.activity.add(t_ns, r.activity, hold_ns)
            total_w += r.power_w or 0.0
        return total_w

    def result(self) -> SourceResult:
        window_s = max(0.0, (self.t_stop_ns - self.t_start_ns) / 1e9)
        gpus = sorted(self._gpus.values(), key=lambda g: (self._nodes.index(g.node), _gpu_order(g.gpu), g.uuid))
        if not gpus:
            errors = "; ".join(f"{n.url}: {n.last_error}" for n in self._nodes)
            return SourceResult(self.name, self.kind, False, reason=f"no dcgm-exporter answered ({errors})")
        periods = {n.url: self._period_ns(n) for n in self._nodes}
        per_gpu = [_per_gpu(g, periods[g.node.url]) for g in gpus]
        values = summarize_power("dcgm", per_gpu, self.max_w_total, window_s)
        values["nodes"] = [
            {"url": n.url, "scrapes_ok": n.ok, "scrapes_failed": n.failed, "last_error": n.last_error}
            for n in self._nodes
        ]
        values["activity_gpus"] = [{"node": g.node.url, "gpu": p["gpu"], "uuid": g.uuid,
                                    "series": g.activity.to_json()} for g, p in zip(gpus, per_gpu)]
        values["activity_missing"] = missing_reasons(self._nodes[0].url if len(self._nodes) == 1 else "dcgm-exporter")
        warnings, losses = self._warnings(gpus, window_s)
        return SourceResult(self.name, self.kind, True, values=values, warnings=warnings, losses=losses)

    def _warnings(self, gpus: list[_Gpu], window_s: float) -> tuple[list[str], list[str]]:
        """(every note of every node, the notes of those that did not answer throughout: data lost)."""
        out, losses = [], []
        for node in self._nodes:
            mine = [g for g in gpus if g.node is node]
            lost = _answer_warnings(node, mine, self.t_start_ns, window_s)
            out += [*lost, *_node_warnings(node, mine)]
            losses += lost
        return out, losses


def _gpu_order(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


def _per_gpu(g: _Gpu, period_ns: int | None) -> dict[str, Any]:
    host = g.hostname or urlsplit(g.node.url).hostname
    return {"node": g.node.url, "gpu": int(g.gpu) if g.gpu.isdigit() else g.gpu, "uuid": g.uuid,
            "hostname": host, "model": g.model,
            **g.stats.figures(lambda snaps: collection_times(snaps, period_ns)),
            "refresh_period_s": period_ns / 1e9 if period_ns else None}  # None also for FRESH: under 60 ms


def _node_warnings(node: _Node, gpus: list[_Gpu]) -> list[str]:
    """The notes about one node's cell beside how it answered: how fresh its values were, what it lacks."""
    return [*_staleness_warnings(node, gpus), *_energy_warnings(node, gpus), *_field_warnings(node, gpus)]


def _answer_warnings(node: _Node, gpus: list[_Gpu], t_start_ns: int, window_s: float) -> list[str]:
    err = f"last error: {node.last_error}"
    if node.ok == 0:
        return [f"dcgm: {node.url} did not answer during the cell ({node.failed} tries; {err})"]
    if node.failing_since_ns is not None:
        since_s = (node.failing_since_ns - t_start_ns) / 1e9
        covered_s = max((g.stats.covered_s for g in gpus), default=0.0)
        return [f"dcgm: {node.url} stopped answering {since_s:.1f} s into the cell ({node.failed} failed scrapes; "
                f"{err}); its {len(gpus)} GPUs' figures cover {covered_s:.1f} s of {window_s:.1f} s, and energy "
                f"per token extrapolates them at the power they drew before"]
    if node.failed:
        return [f"dcgm: {node.failed} of {node.ok + node.failed} scrapes of {node.url} failed ({err})"]
    return []


def _staleness_warnings(node: _Node, gpus: list[_Gpu]) -> list[str]:
    if gpus and all(g.stats.never_changed for g in gpus):
        span_s = max(g.stats.covered_s for g in gpus)
        return [f"dcgm: {node.url} served identical values for the whole cell ({span_s:.1f} s, "
                f"{max(g.stats.n for g in gpus)} samples): its collect interval is longer than the cell, so these "
                f"power and energy figures mean nothing; run dcgm-exporter with -c 1000 or less"]
    longest_s = max((g.stats.longest_unchanged_ns / 1e9 for g in gpus), default=0.0)
    if longest_s >= STALE_AFTER_S:
        return [f"dcgm: {node.url} values stayed unchanged for up to {longest_s:.1f} s: dcgm-exporter collects "
                f"that rarely (default -c 30000), so figures are coarse; run it with -c 1000 or less"]
    return []


def _energy_warnings(node: _Node, gpus: list[_Gpu]) -> list[str]:
    out = []
    integrated = [g for g in gpus if g.stats.figures()["energy_method"] is EnergyMethod.INTEGRATED]
    if integrated:
        every_s = integrated[0].stats.covered_s / max(1, integrated[0].stats.n - 1)
        out.append(
            f"dcgm: {node.url} does not export {ENERGY}: energy of {len(integrated)} GPUs integrated from "
            f"{POWER} samples (trapezoid, one every {every_s:.2f} s)")
    resets = [f"gpu {g.gpu}" for g in gpus if g.stats.resets]
    if resets:
        out.append(f"dcgm: energy counter restarted during the cell on {node.url} ({', '.join(resets)}): "
                   f"the segments before and after were added")
    return out


def _field_warnings(node: _Node, gpus: list[_Gpu]) -> list[str]:
    out = []
    if gpus and all(g.stats.limit_w is None for g in gpus):
        out.append(f"dcgm: {node.url} exports no power limit: add {MGMT_LIMIT} (or {ENFORCED_LIMIT}) to "
                   f"dcgm-exporter's counters CSV (-f) to get power as a fraction of the limit")
    if node.blank_fields:
        out.append(f"dcgm: {node.url} sent DCGM blank values (>= 1e18, field not supported) for "
                   f"{', '.join(sorted(node.blank_fields))}: ignored")
    if node.skipped_lines:
        out.append(f"dcgm: {node.skipped_lines} malformed lines from {node.url} skipped")
    return out
