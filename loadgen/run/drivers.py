"""Cell drivers: how a cell's jobs become load. The runner is given one driver, chosen by the CLI.

- `ClosedLoop`: C slots, each sends its next request when its previous one ends.
- `OpenLoop`: requests leave on a precomputed schedule at a target rate (`--request-rate`, `--ramp`).
- Wrappers that take another driver as a constructor argument and implement every method of `Driver`
  themselves, forwarding explicitly: `parallel.shard.ShardPart` (this process's part of every cell),
  `parallel.shard.AlignedStart` (cell k starts at T + k·S), `parallel.worker_driver.WorkerDriver` (the slots
  spread over worker processes).

A driver plans and drives, nothing else: it answers how many measured requests a cell plans, runs the warmup
requests (`warm_up`, before the cell's telemetry opens), runs the measured load (`drive`) and returns its own
figures of the load (`finish`: `CellFindings`, which the builder puts into the cell's result). It sends the
jobs of views of the cell's run (`CellRun.phase`, `split`, `untimed`); what the load did is the run's outcome.
What is printed about a kind of load (the banner, the tables after the matrix) is chosen by the CLI and
rendered in `loadgen.results`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from loadgen.config import CellSize, OpenLoopConfig, default_requests_per_rate
from loadgen.metrics.open_loop import Ramp, corrected_ttft_s, ramp_series, sustainable_rate
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.throttle import throttle_figures
from loadgen.names import Phase
from loadgen.record import CellKey, Record
from loadgen.results.findings import NOTHING, CellFindings
from loadgen.run.transport import Transport
from loadgen.schedule import arrivals
from loadgen.schedule.cell_run import CellRun
from loadgen.schedule.closed import Pause, closed_loop
from loadgen.schedule.open import open_loop
from loadgen.schedule.throttle import StartGate
from loadgen.workload.corpus import seeded_rng

NS = 1e9


class Driver(Protocol):
    """What the cell measurer asks of a driver."""

    def planned_requests(self, cell: CellKey) -> int:
        """Measured requests the cell plans."""
        ...

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """Send the warmup requests, to completion, before the measured window (and its telemetry) opens."""
        ...

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        """Send the measured load."""
        ...

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        """The driver's own figures of the cell's load, for the builder."""
        ...


class ClosedLoop:
    """C slots; with `gate` (`--max-request-rate`), never more starts per second than the gate lets through
    (one gate for the whole run, so the ceiling holds across warmup and cells)."""

    def __init__(self, size: CellSize, transport: Transport, pause: Pause | None = None,
                 gate: StartGate | None = None, slot_ramp_s: float = 0.0):
        self.size = size
        self.transport = transport
        self.pause = pause
        self.gate = gate
        self.slot_ramp_s = slot_ramp_s  # --slot-ramp: the slots' starts spread over this

    def planned_requests(self, cell: CellKey) -> int:
        """--requests-per-cell or max(16, 3×C)."""
        return self.size.requests_for(cell.concurrency)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """The warmup jobs through the same slots as the measured load, so server-side sources see only
        measured traffic in the window."""
        warmup = run.phase(Phase.WARMUP)
        if warmup.jobs_left():
            await self._load(warmup, cell)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self._load(run.phase(Phase.MEASURE), cell)

    async def _load(self, run: CellRun, cell: CellKey) -> None:
        await self.transport.warm(cell.concurrency)
        if self.gate is not None:
            self.gate.reset()
        await closed_loop(run, cell.concurrency, self.pause, self.gate, self.slot_ramp_s)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        g = self.gate
        if g is None:
            return NOTHING
        table = RecordTable.of(measured)
        ends = table.ints("t_end_ns")
        span_s = ((int(ends.max()) if len(ends) else g.since_ns) - g.since_ns) / 1e9
        return CellFindings(load={"throttle": throttle_figures(table, g.rate, g.waited_ns, g.waits,
                                                               cell.concurrency, span_s)})


class OpenLoop:
    """Request i of a cell is due at t0 + offset_i; the offsets are drawn once per cell, seeded by --seed,
    the law and the rate (the same schedule for every context, so contexts compare on identical arrivals)."""

    def __init__(self, size: CellSize, opts: OpenLoopConfig, seed: int, transport: Transport):
        self.size = size
        self.seed = seed
        self.transport = transport
        self.opts = opts
        self.ramp = Ramp(self.opts.ramp.r0, self.opts.ramp.r1, self.opts.ramp.duration_s) if self.opts.ramp \
            else None
        self.offsets: dict[CellKey, list[float]] = {}
        self.t0_ns: dict[CellKey, int] = {}

    def schedule(self, cell: CellKey) -> list[float]:
        """Offsets (s) of every request of the cell, warmup first; drawn once per cell."""
        if cell not in self.offsets:
            o, size, ramp, law, rate = self.opts, self.size, self.ramp, self.opts.arrival, cell.request_rate
            assert law is not None and rate is not None  # an open-loop cell: it has both
            rng = seeded_rng(self.seed, "arrivals", law, o.burstiness, rate, ramp.r0 if ramp else None)
            if ramp:
                offs = arrivals.ramp_offsets_s(law, ramp.r0, ramp.r1, ramp.duration_s, rng, o.burstiness)
            elif size.duration_per_cell_s:
                offs = arrivals.offsets_for_span_s(law, rate, size.duration_per_cell_s, rng, o.burstiness,
                                                   lead=size.warmup)
            else:
                n = size.requests_per_cell or default_requests_per_rate(rate)
                offs = arrivals.offsets_s(law, rate, size.warmup + n, rng, o.burstiness)
            self.offsets[cell] = offs
        return self.offsets[cell]

    def planned_requests(self, cell: CellKey) -> int:
        return max(0, len(self.schedule(cell)) - self.size.warmup)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """Nothing apart: the warmup requests are the schedule's first ones."""

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        # the schedule ends the cell: one late past --duration-per-cell still goes
        await self.transport.warm(cell.concurrency)
        t0 = self.t0_ns[cell] = time.monotonic_ns()
        await open_loop(run.untimed(), [t0 + round(o * NS) for o in self.schedule(cell)], self.opts.max_concurrency)

    def finish(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> CellFindings:
        o, ramp = self.opts, self.ramp
        load = {"target_request_rate": ramp.mean_rate if ramp else cell.request_rate,
                "arrival": {"law": o.arrival, "burstiness": o.burstiness, "max_concurrency": o.max_concurrency}}
        if ramp:
            load |= self.ramp_figures(cell, measured)
        return CellFindings(load=load)

    def ramp_figures(self, cell: CellKey, measured: Sequence[Record] | RecordTable) -> dict:
        """--ramp: the sustainable rate and the ramp's windows (`metrics.open_loop.sustainable_rate`)."""
        o, ramp, slo_s = self.opts, self.ramp, self.opts.slo_ttft_s
        assert ramp is not None and slo_s is not None  # --ramp, which run_config gives its --slo-ttft
        table = RecordTable.of(measured)
        intended = table.ints("t_intended_ns")
        order = np.argsort(intended, kind="stable")  # by intended send, ties in record order
        t0 = self.t0_ns.get(cell, 0)
        t_s = ((intended[order] - t0) / NS).tolist()
        ttft = corrected_ttft_s(table)[order].tolist()
        window = o.ramp_window_s or ramp.duration_s / 10
        verdict = sustainable_rate(t_s, ttft, ramp, slo_s, window)
        return {"sustainable_request_rate": verdict["sustainable_request_rate"],
                "ramp": {"r0": ramp.r0, "r1": ramp.r1, "duration_s": ramp.duration_s, "slo_ttft_s": o.slo_ttft_s,
                         "window_s": window, **verdict, "series": ramp_series(t_s, ttft, ramp, window)}}
