"""Cell drivers: how a cell's jobs become load. The runner is given one driver, chosen by the CLI.

- `ClosedLoop`: C slots, each sends its next request when its previous one ends.
- `OpenLoop`: requests leave on a precomputed schedule at a target rate (`--request-rate`, `--ramp`).
- Wrappers that take another driver: `parallel.shard.ShardPart` (this process's part of every cell),
  `parallel.shard.AlignedStart` (cell k starts at T + k·S), `parallel.workers.WorkerDriver` (the slots spread
  over worker processes).

A driver answers how many measured requests a cell plans, runs the warmup requests (`warm_up`, before the
cell's telemetry opens), runs the measured load (`drive`), and adds its own figures to the cell's entry
(`finish`). `load` sends whatever jobs the cell run holds; `warm_up` and `drive` are built from it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from loadgen.config import RunConfig, default_requests_per_rate
from loadgen.metrics.open_loop import (
    Ramp,
    corrected_ttft_s,
    ramp_series,
    sustainable_rate,
)
from loadgen.metrics.throttle import throttle_figures
from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult
from loadgen.results.open_table import render as render_open_loop
from loadgen.results.throttle_table import throttle_table
from loadgen.run.transport import Transport
from loadgen.schedule import arrivals
from loadgen.schedule.closed import CellRun, closed_loop
from loadgen.schedule.open import open_loop
from loadgen.schedule.throttle import StartGate
from loadgen.workload.corpus import seeded_rng

NS = 1e9
Pause = Callable[[Record], Awaitable[None]]


class Driver:
    """The closed-loop defaults every driver starts from."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg

    def banner(self) -> str | None:
        """A line said once before the run (what kind of load it is), or None."""
        return None

    def tables(self, cells: list[dict]) -> list[str]:
        """Tables printed after the matrix at the end of the run."""
        return []

    def planned_requests(self, cell: CellKey) -> int:
        """Measured requests of a cell: --requests-per-cell or max(16, 3×C)."""
        return self.cfg.requests_for(cell.concurrency)

    async def load(self, run: CellRun, cell: CellKey) -> None:
        raise NotImplementedError

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """The warmup requests run to completion before the measured window (and its telemetry) opens, so
        server-side sources see only measured traffic; they go the same way as the measured load."""
        w = self.cfg.warmup
        if not w:
            return
        measure = run.jobs[w:]
        run.jobs = run.jobs[:w]
        await self.load(run, cell)
        run.jobs, run.next_job = measure, 0

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        await self.load(run, cell)

    def finish(self, cell: CellKey, result: CellResult, measured: Sequence[Record]) -> None:
        """Add the driver's own figures to the cell's result (in place)."""


class ClosedLoop(Driver):
    """C slots; with `gate` (`--max-request-rate`), never more starts per second than the gate lets through
    (one gate for the whole run, so the ceiling holds across warmup and cells)."""

    def __init__(self, cfg: RunConfig, transport: Transport, pause: Pause | None = None,
                 gate: StartGate | None = None):
        super().__init__(cfg)
        self.transport = transport
        self.pause = pause
        self.gate = gate

    def banner(self) -> str | None:
        if self.gate is None:
            return None
        return f"closed loop with a ceiling: at most {self.gate.rate:g} request starts per second"

    def tables(self, cells: list[dict]) -> list[str]:
        return [throttle_table(cells)] if self.gate is not None else []

    async def load(self, run: CellRun, cell: CellKey) -> None:
        await self.transport.warm(cell.concurrency)
        if self.gate is not None:
            self.gate.reset()
        await closed_loop(run, cell.concurrency, self.pause, self.gate)

    def finish(self, cell: CellKey, result: CellResult, measured: Sequence[Record]) -> None:
        g = self.gate
        if g is not None:
            span_s = (max((r.t_end_ns for r in measured), default=g.since_ns) - g.since_ns) / 1e9
            result.load.throttle = throttle_figures(measured, g.rate, g.waited_ns, g.waits, cell.concurrency, span_s)


class Wrapper(Driver):
    """A driver that adapts another one; what it does not change, the inner driver answers."""

    def __init__(self, inner: Driver):
        super().__init__(inner.cfg)
        self.inner = inner

    def banner(self) -> str | None:
        return self.inner.banner()

    def tables(self, cells: list[dict]) -> list[str]:
        return self.inner.tables(cells)

    def planned_requests(self, cell: CellKey) -> int:
        return self.inner.planned_requests(cell)

    async def load(self, run: CellRun, cell: CellKey) -> None:
        await self.inner.load(run, cell)

    def finish(self, cell: CellKey, result: CellResult, measured: Sequence[Record]) -> None:
        self.inner.finish(cell, result, measured)


class OpenLoop(Driver):
    """Request i of a cell is due at t0 + offset_i; the offsets are drawn once per cell, seeded by --seed,
    the law and the rate (the same schedule for every context, so contexts compare on identical arrivals)."""

    def __init__(self, cfg: RunConfig, transport: Transport):
        super().__init__(cfg)
        self.transport = transport
        self.opts = cfg.open_loop
        self.ramp = Ramp(self.opts.ramp.r0, self.opts.ramp.r1, self.opts.ramp.duration_s) if self.opts.ramp \
            else None
        self.offsets: dict[CellKey, list[float]] = {}
        self.t0_ns: dict[CellKey, int] = {}

    def banner(self) -> str:
        o, ramp = self.opts, self.ramp
        load = (f"ramp {ramp.r0:g}→{ramp.r1:g} req/s over {ramp.duration_s:g} s" if ramp
                else "rates " + ",".join(f"{r:g}" for r in o.request_rate) + " req/s")
        burst = f" (burstiness {o.burstiness:g})" if o.arrival == "gamma" else ""
        return (f"open loop: {o.arrival} arrivals{burst}, {load}, cap {o.max_concurrency or 'none'} "
                "(--concurrency is not used)")

    def tables(self, cells: list[dict]) -> list[str]:
        return [render_open_loop(cells)]

    def schedule(self, cell: CellKey) -> list[float]:
        """Offsets (s) of every request of the cell, warmup first; drawn once per cell."""
        if cell not in self.offsets:
            o, cfg, ramp = self.opts, self.cfg, self.ramp
            rng = seeded_rng(cfg.seed, "arrivals", o.arrival, o.burstiness, cell.request_rate,
                             ramp.r0 if ramp else None)
            if ramp:
                offs = arrivals.ramp_offsets_s(o.arrival, ramp.r0, ramp.r1, ramp.duration_s, rng, o.burstiness)
            elif cfg.duration_per_cell_s:
                offs = arrivals.offsets_for_span_s(o.arrival, cell.request_rate, cfg.duration_per_cell_s, rng,
                                                   o.burstiness, lead=cfg.warmup)
            else:
                n = cfg.requests_per_cell or default_requests_per_rate(cell.request_rate)
                offs = arrivals.offsets_s(o.arrival, cell.request_rate, cfg.warmup + n, rng, o.burstiness)
            self.offsets[cell] = offs
        return self.offsets[cell]

    def planned_requests(self, cell: CellKey) -> int:
        return max(0, len(self.schedule(cell)) - self.cfg.warmup)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """Nothing apart: the warmup requests are the schedule's first ones."""

    async def load(self, run: CellRun, cell: CellKey) -> None:
        run.deadline_ns = None  # the schedule ends the cell: one late past --duration-per-cell still goes
        await self.transport.warm(cell.concurrency)
        t0 = self.t0_ns[cell] = time.monotonic_ns()
        await open_loop(run, [t0 + round(o * NS) for o in self.schedule(cell)], self.opts.max_concurrency)

    def finish(self, cell: CellKey, result: CellResult, measured: Sequence[Record]) -> None:
        recs = sorted(measured, key=lambda r: r.t_intended_ns)
        o, ramp = self.opts, self.ramp
        result.load.target_request_rate = ramp.mean_rate if ramp else cell.request_rate
        result.load.arrival = {"law": o.arrival, "burstiness": o.burstiness, "max_concurrency": o.max_concurrency}
        if ramp:
            t0 = self.t0_ns.get(cell, 0)
            t_s = [(r.t_intended_ns - t0) / NS for r in recs]
            ttft = [corrected_ttft_s(r) for r in recs]
            window = o.ramp_window_s or ramp.duration_s / 10
            verdict = sustainable_rate(t_s, ttft, ramp, o.slo_ttft_s, window)
            result.load.sustainable_request_rate = verdict["sustainable_request_rate"]
            result.load.ramp = {"r0": ramp.r0, "r1": ramp.r1, "duration_s": ramp.duration_s,
                             "slo_ttft_s": o.slo_ttft_s, "window_s": window, **verdict,
                             "series": ramp_series(t_s, ttft, ramp, window)}
