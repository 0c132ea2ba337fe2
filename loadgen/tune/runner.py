"""Running a tune: every configuration visited once, then the contenders of every open tie and the control.

    first pass   each configuration in file order: restart, readiness, every wanted load in `first` parts
    end          round 1: the control (the first feasible configuration) at its first load (`control`) and at
                 the loads where it is a contender; then each other contender at its open loads (`again`);
                 rounds 2 … `[tune] rounds`: the contenders again

Each visit is the sweep's `run_config` with a `VisitPlan` for its cells (`plan.py`), so the restart, readiness,
results, records and diagnostics are the sweep's. After each visit `tune.json` is written (`result.py`) with the
visits so far: the same command resumes, skipping every finished visit and every finished part.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from loadgen.config import CellSize, default_requests_per_rate
from loadgen.console import log
from loadgen.files import read_json
from loadgen.results.stored import kept_cells, stored_cells
from loadgen.results.verdict import Decision, Load, Verdict
from loadgen.sweep import state
from loadgen.sweep.runner import Plan, RunBuilder, StopSweep, plan_sweep, run_config
from loadgen.sweep.summary import lock_dir
from loadgen.tune.budget import Budget
from loadgen.tune.decide import contenders, part_requests, round_room, visit_order
from loadgen.tune.live import TuneState, tune_state
from loadgen.tune.plan import Role, VisitPlan, Want, measured_requests
from loadgen.tune.result import TUNE_FILE, tune_document, write_tune
from loadgen.tune.spec import TuneSpec
from loadgen.tune.standings import Standings, read_standings

RunsFor = Callable[[VisitPlan | None], RunBuilder]
"""The command line's runs (the sweep's `RunBuilder`): a configuration's run parsed as `loadgen ARGS` would be, its
cells the visit's plan (None: the matrix, for checking every configuration's arguments before anything runs)."""


class FirstPass(Protocol):
    """Which configuration the first pass visits next, from what the folder says so far (`Standings`) and the
    configurations already visited; None ends the first pass. The tune's one seam for choosing configurations:
    `Spread` visits every configuration of the file; an optimiser over a space too large to visit whole (max running
    requests, a chunked-prefill size) would propose the next one here from the standings (docs/tune.md)."""

    def next(self, st: Standings, visited: list[str]) -> str | None: ...


class Spread:
    """Every configuration of the file, in `decide.visit_order`: the first, the last, then the middle of every gap."""

    def __init__(self, names: list[str]):
        self.order = [names[i] for i in visit_order(len(names))]

    def next(self, st: Standings, visited: list[str]) -> str | None:
        return next((n for n in self.order if n not in visited), None)


@dataclass
class Visit:
    """One visit of a configuration: its phase (`first`, `end 1`, …), when, how long (the wall time of the
    restart, the readiness wait and its cells), and how it ended."""

    config: str
    phase: str
    started_at: str
    wall_s: float
    ready_s: float | None
    restarted: bool
    status: str  # ok | partial | failed (the sweep's), interrupted, or done (nothing was left to measure)
    parts: int
    reason: str | None = None

    @property
    def finished(self) -> bool:
        return self.status != "interrupted"


def full_requests(size: CellSize, load: Load) -> int:
    """The sweep's measured requests of a cell at `load` (requests_per_cell, else its default)."""
    if load.request_rate is None:
        return size.requests_for(load.concurrency)
    return size.requests_per_cell or default_requests_per_rate(load.request_rate)


class Tune:
    def __init__(self, spec: TuneSpec, plans: list[Plan], runs: RunsFor, stop: StopSweep,
                 first: FirstPass | None = None):
        self.spec, self.runs, self.stop = spec, runs, stop
        self.first = first or Spread([c.name for c in spec.configs])
        self.plans = {p.cfg.name: p for p in plans}
        self.size = plans[0].run_cfg.size
        self.loads = list(dict.fromkeys(Load.of(k) for k in plans[0].run_cfg.cells()))
        earlier = _read_tune(spec.out_dir)
        self.visits = [Visit(**v) for v in earlier.get("visits") or []]
        self.started_at = earlier.get("started_at") or datetime.now(UTC).isoformat()
        self.stopped: str | None = None  # why the tune stopped measuring before its end (the budget)
        self.complete = False  # every phase went through

    def room(self, load: Load) -> int:
        """The parts a round at the end measures of each contender at `load`."""
        return round_room(full_requests(self.size, load), load.concurrency, self.spec.tune.first_part)

    def want(self, load: Load, role: Role, contender: bool = False) -> Want:
        full = full_requests(self.size, load)
        return Want(load, role, full, part_requests(full, load.concurrency, self.spec.tune.first_part), contender)

    def done(self, name: str, phase: str) -> bool:
        return any(v.config == name and v.phase == phase and v.finished for v in self.visits)

    async def run(self) -> None:
        first = [self.want(ld, Role.FIRST) for ld in self.loads]
        while (name := self.first.next(read_standings(self.spec), self.visited())) is not None:
            if not await self.visit(read_standings(self.spec), name, "first", first):
                return
        self.complete = await self.end()

    def visited(self) -> list[str]:
        """The configurations whose first visit is over, in the order they were visited."""
        return list(dict.fromkeys(v.config for v in self.visits if v.phase == "first" and v.finished))

    async def end(self) -> bool:
        rounds = self.spec.tune.rounds
        for r in range(1, max(rounds, 1) + 1):
            phase = f"end {r}"
            control = self.control(read_standings(self.spec))
            names = [c.name for c in self.spec.configs]
            order = [control, *[n for n in names if n != control]] if r == 1 and control else names
            for name in order:
                st = read_standings(self.spec)
                if self.done(name, phase) or name in st.infeasible:
                    continue
                contends = [ld for ld, who in self.open_loads(st).items() if name in who] if r <= rounds else []
                if r == 1 and name == control:
                    wants = [self.want(ld, Role.CONTROL, ld in contends) for ld in self.loads]
                else:
                    wants = [self.want(ld, Role.AGAIN) for ld in contends]
                if wants and not await self.visit(st, name, phase, wants):
                    return False
        return True

    def control(self, st: Standings) -> str | None:
        """The first configuration visited that is feasible and has a finished first part: measured again at the
        end."""
        for name in self.visited():
            if name not in st.infeasible and any(c.finished and not c.key.again for c in st.cells_of(name)):
                return name
        return None

    def open_loads(self, st: Standings) -> dict[Load, list[str]]:
        """Per load, the contenders of a tie not settled at the resolution that a round could still move
        (`decide.contenders`)."""
        out = {}
        for load in self.loads:
            found = contenders(st.answer(load), st.spec.higher_is_better, st.resolution, self.room(load))
            if found:
                out[load] = found
        return out

    def cells_measured(self, st: Standings) -> int:
        return sum(1 for r in st.runs for c in r.cells.values() if measured_requests(c))

    def spent_s(self) -> float:
        return sum(v.wall_s for v in self.visits)

    async def visit(self, st: Standings, name: str, phase: str, wants: list[Want]) -> bool:
        """Visit `name` for `wants`; False when the tune must stop (the budget, an interrupt)."""
        plan = self.plans[name]
        doc = state.load_doc(plan.paths["results"])
        budget = Budget(self.spec.tune.max_cells, self.spec.tune.max_gpu_minutes, self.cells_measured(st),
                        self.spent_s())
        if (why := budget.why_not()) is not None:
            self.stopped = why
            log(f"tune {self.spec.name}: {why}: no more visits")
            return False
        vp = VisitPlan(name, wants, {w.load: st.rival(name, w.load) for w in wants}, st.spec, st.resolution,
                       st.between, budget, (doc or {}).get("tune"), standing=lambda: self.standing(name, phase))
        order = vp.order(stored_cells(doc))
        if len(kept_cells(doc, order)) == len(order):
            self.visits.append(Visit(name, phase, datetime.now(UTC).isoformat(), 0.0, None, False, "done", 0))
            return True
        log(f"tune {self.spec.name}: {phase}: {name}: " + ", ".join(f"{w.role} {w.load.text()}" for w in wants))
        started, t0 = datetime.now(UTC).isoformat(), time.monotonic()
        status: str = "interrupted"
        try:
            found = await run_config(self.spec, Plan(plan.cfg, plan.paths, plan.run_cfg, doc), order, False,
                                     self.stop, self.runs(vp))
            status = "interrupted" if self.stop.signum is not None else found.value
        finally:
            after = state.load_doc(plan.paths["results"]) or {}
            last = (((after.get("sweep") or {}).get("attempts")) or [{}])[-1]
            self.visits.append(Visit(name, phase, started, time.monotonic() - t0,
                                     (last.get("readiness") or {}).get("elapsed_s"), True, status,
                                     len(vp.sizes), last.get("reason")))
            self.write()
        if vp.ended and budget.why_not():
            self.stopped = budget.why_not()
            return False
        return self.stop.signum is None

    def standing(self, name: str, phase: str) -> TuneState:
        """The state while `name` is visited (`phase`): tune.json written anew, the visit's restart counted."""
        now = tune_state(self.write(), name, phase)
        return replace(now, restarts=now.restarts + 1)

    def write(self) -> dict[str, Any]:
        full = {ld: full_requests(self.size, ld) for ld in self.loads}
        doc = tune_document(self.spec, read_standings(self.spec), self.loads, [asdict(v) for v in self.visits],
                            self.started_at, self.stopped, self.complete, self.grid_requests(), full)
        write_tune(self.spec.out_dir, doc)
        return doc

    def grid_requests(self) -> dict[str, int]:
        """The full grid at the sweep's requests per cell: every configuration at every load."""
        n = len(self.spec.configs)
        return {"restarts": n, "cells": n * len(self.loads),
                "requests": n * sum(full_requests(self.size, ld) for ld in self.loads)}


def _read_tune(out_dir: str) -> dict[str, Any]:
    path = os.path.join(out_dir, TUNE_FILE)
    if not os.path.exists(path):
        return {}
    doc = read_json(path)
    return doc if isinstance(doc, dict) else {}


@dataclass
class TuneOutcome:
    """How the tune ended: its exit status, its `tune.json` (and where), and the answer at each wanted load."""

    code: int
    doc: dict[str, Any]
    path: str
    answers: list[Verdict]


async def run_tune(spec: TuneSpec, runs: RunsFor) -> TuneOutcome:
    """The tune of `spec` (module docstring): 0 when every wanted load has an answer, 1 when some load has no
    feasible configuration, 128 + the signal when interrupted."""
    os.makedirs(spec.out_dir, exist_ok=True)
    lock = lock_dir(spec.out_dir)
    stop = StopSweep()
    stop.arm()
    try:
        tune = Tune(spec, plan_sweep(spec, False, None, runs(None)), runs, stop)
        log(f"tune {spec.name}: {len(spec.configs)} configurations × {len(tune.loads)} loads, objective "
            f"{spec.tune.objective}, results in {spec.out_dir}")
        tune.write()
        try:
            await tune.run()
        except asyncio.CancelledError:
            if stop.signum is None:
                raise
            task = asyncio.current_task()
            assert task is not None  # the tune's own, which the signal cancelled
            task.uncancel()
        doc = tune.write()
    finally:
        lock.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().remove_signal_handler(sig)
    st = read_standings(spec)
    answers = [st.answer(ld) for ld in tune.loads]
    code = 128 + stop.signum if stop.signum is not None else \
        0 if all(v.decision is not Decision.NONE for v in answers) else 1
    return TuneOutcome(code, doc, os.path.join(spec.out_dir, TUNE_FILE), answers)

