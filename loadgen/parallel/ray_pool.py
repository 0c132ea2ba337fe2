"""`--ray ADDRESS`: a cell's parts run as Ray actors, one per node (docs/distributed.md).

The driver (this process) keeps everything `--workers` keeps in the parent: setup, prompts, jobs, the sinks
(JSONL, live exporter), telemetry, the summary and the choice of the next cell, so plain runs, `--repeat`,
`loadgen search` and `loadgen sweep` run unchanged. Each part is a `ray_actor.WorkerActor` placed by
`ray_plan.plan`, running the `--workers` worker code; the driver feeds it jobs over TCP exactly as it feeds a
worker process over its pipes (`dispatch.Dispatch`), through a `ray_worker.RayWorker` that moves every time onto
the driver's clock. Before the first cell and before each cell the clocks are mapped again (ping-pong); a node
mapped worse than `ray_clock.MAX_UNCERTAINTY_NS` is named before any load.

A part lost mid-cell (its actor or node gone): its requests in flight get a failed record naming the node, the
jobs it held unsent count as not sent, the cell stops and is judged on what it measured (a `worker_lost`
incident beside `--max-failed-fraction`'s verdict); later cells run on the parts left, or, none left, are
skipped with the reason.

The results file's `ray` part says where: the nodes (host, IP, cores, Ray node id), which part ran where, each
node's clock mapping, and for every cell the parts that ran it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from types import ModuleType
from typing import TYPE_CHECKING

from loadgen.config import ParallelConfig, RunConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.parallel import wire
from loadgen.parallel.ray_clock import MAX_UNCERTAINTY_NS, too_uncertain
from loadgen.parallel.ray_plan import Placement, Plan, plan, ray_nodes
from loadgen.parallel.ray_worker import RayWorker, ray_result
from loadgen.parallel.workers import START_TIMEOUT_S, WorkerPool
from loadgen.record import CellKey
from loadgen.schedule.cell_run import CellRun
from loadgen.target.discover import Target

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup

RAY_FIX = "pip install 'loadgen[ray]'"
PLACEMENT_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 5.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")
EXIT_GRACE_S = 5.0


def connect(address: str) -> ModuleType:
    """`ray`, connected to the cluster at `address`; UsageError (exit 2) with the fix when it cannot be."""
    host = reachable(address)
    if host in LOOPBACK:
        # Ray takes a loopback address for "this host" and connects to the host's outward IP instead, where a
        # cluster bound to 127.0.0.1 does not listen; this keeps the driver on loopback too (read at import)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # the parts use no accelerator
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, which is not installed here: {RAY_FIX}") from None
    logging.getLogger("ray").setLevel(logging.ERROR)  # its notices are not loadgen's lines (set after its import)
    if ray.is_initialized():
        return ray
    done: list = []

    def init() -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=False)
            done.append(None)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError or its own errors by version
            done.append(exc)

    thread = threading.Thread(target=init, name="ray-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S)
    why = f"no answer in {CONNECT_TIMEOUT_S:g} s" if not done else done[0] and _first_line(done[0])
    if why:
        raise UsageError(f"--ray {address}: cannot reach a Ray cluster ({why}); start one (ray start --head) "
                         "or give its address")
    return ray


def reachable(address: str) -> str | None:
    """The address's host, once its port answers (a refused or unroutable address fails now, not after Ray's
    retries); None for `auto`."""
    if address == "auto":
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(f"--ray {address}: cannot reach a Ray cluster there ({exc.strerror or exc}); start one "
                         "(ray start --head) or give its address") from None
    return host


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def place(ray, p: Plan, placement_group=None) -> list:
    """One actor per part of the plan, each on its node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

    from loadgen.parallel.ray_actor import WorkerActor

    actor = ray.remote(num_cpus=1, max_restarts=0)(WorkerActor)
    if p.placement is Placement.STRICT_SPREAD:
        return [actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group, placement_group_bundle_index=i)).remote(i + 1) for i in range(p.parts)]
    return [actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(i + 1)
            for i, node in enumerate(p.pinned)]


class RayPool(WorkerPool):
    """The parts of every cell, as Ray actors for the whole run (a `Service`: started after setup)."""

    def __init__(self, par: ParallelConfig, cfg: RunConfig, url: str, headers: dict, section: dict):
        super().__init__(par.workers, cfg, url, headers)
        assert par.ray_address is not None, "a RayPool is made for --ray only"
        self.address, self.per_node = par.ray_address, par.workers_per_node
        self.section = section  # the results file's `ray` part, filled here
        self.lost: dict[CellKey, list[str]] = {}  # parts lost in a cell
        self.dropped: list[str] = []  # parts lost between cells, said with the next cell
        self.ran: dict[CellKey, list[dict]] = {}  # the parts that ran each cell's last phase
        self.parts: list[RayWorker] = []  # (the pool's `workers`, worker processes, stay none)
        self.placement_group: PlacementGroup | None = None
        self.ray: ModuleType | None = None

    async def start(self, target: Target | None = None) -> None:
        ray = self.ray = connect(self.address)
        nodes = ray_nodes(ray.nodes())
        p = plan(nodes, self.n, self.per_node)
        if p.placement is Placement.STRICT_SPREAD:
            group = self.placement_group = ray.util.placement_group([{"CPU": 1}] * p.parts, strategy="STRICT_SPREAD")
            try:
                await ray_result(group.ready(), PLACEMENT_TIMEOUT_S)
            except TimeoutError:
                raise UsageError(f"--ray: {p.parts} parts, one per node, could not be placed in "
                                 f"{PLACEMENT_TIMEOUT_S:g} s (each needs a free CPU on its own node)") from None
        actors = place(ray, p, self.placement_group)
        infos = await asyncio.gather(*(ray_result(a.node.remote(), START_TIMEOUT_S) for a in actors))
        addresses = await asyncio.gather(*(ray_result(a.listen.remote(), START_TIMEOUT_S) for a in actors))
        self.parts = [RayWorker(i + 1, a, info) for i, (a, info) in enumerate(zip(actors, infos))]
        self.n = len(self.parts)
        for w, address in zip(self.parts, addresses):
            await w.connect(tuple(address))
            w.send(self.setup)
        for w in self.parts:
            msg = await asyncio.wait_for(w.recv(), START_TIMEOUT_S)
            if not isinstance(msg, wire.Ready):
                raise RuntimeError(f"{w.name()} did not start: {msg}")
        await self.sync_clocks()
        self.describe(nodes, p)

    def describe(self, nodes, p: Plan) -> None:
        """The `ray` part of the results, and what the driver says before any load."""
        self.section.update({
            "address": self.address, "placement": p.placement, "parts": [w.describe() for w in self.parts],
            "nodes": [{"node_id": n.node_id, "host": n.host, "ip": n.ip, "cpus": n.cpus} for n in nodes],
            "max_clock_uncertainty_ns": MAX_UNCERTAINTY_NS, "cells": []})
        for w in self.parts:
            log(f"--ray: {w.name()}, {w.node['cores']} cores; clock ± {w.clock.uncertainty_ns / 1e3:.0f} µs")
        shaky = too_uncertain({w.name(): w.clock for w in self.parts})
        if shaky:
            log(f"--ray: clocks mapped worse than ± {MAX_UNCERTAINTY_NS / 1e6:g} ms: {', '.join(shaky)}; times "
                "compared across these nodes (a cell's window) carry that error")

    async def sync_clocks(self) -> None:
        """Map every part's clock again; a part that does not answer is lost before the cell."""
        for w in list(self.parts):
            try:
                await w.sync_clock()
            except (TimeoutError, ConnectionError, OSError) as exc:
                w.abort(f"no answer to the clock exchange ({type(exc).__name__})")
                self.dropped.append(w.gone())
        self.parts = [w for w in self.parts if not w.lost]
        self.n = len(self.parts)
        self.section["clock"] = {w.node["node_id"]: w.clock.as_dict() for w in self.parts}

    async def run_cell(self, run: CellRun, cell: CellKey) -> list[dict]:
        await self.sync_clocks()
        if not self.parts:
            return []
        watchers = [asyncio.ensure_future(w.watch()) for w in self.parts]
        try:
            figures = await self.run_parts(self.parts, run, cell)
        finally:
            for t in watchers:
                t.cancel()
        ran = [w.describe() for w in self.parts]
        if run.cell in self.problems:
            self.lost.setdefault(run.cell, []).extend(self.problems.pop(run.cell))
        self.parts = [w for w in self.parts if not w.lost]
        self.n = len(self.parts)
        self.broken = not self.parts
        self.ran[run.cell] = ran
        return figures

    async def close(self, finished: bool = True) -> None:
        for w in self.parts:
            w.send(wire.Exit())
        for w in self.parts:
            if w.reader is None or w.writer is None:  # never connected (the start failed before it)
                continue
            try:
                await asyncio.wait_for(w.reader.read(), EXIT_GRACE_S)
            except (TimeoutError, ConnectionError, OSError):
                pass
            w.writer.close()
        if self.ray is not None:
            for w in self.parts:
                self.ray.kill(w.actor)
            if self.placement_group is not None:
                self.ray.util.remove_placement_group(self.placement_group)
