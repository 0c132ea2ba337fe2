"""Splitting one cell's load: over worker processes (`--workers`) and over hosts (`--shard i/N`).

The split is the same in both: slot s of a cell's C slots belongs to part s mod N, and request j (sequence
number) to the part that owns slot j mod C. So N parts run C slots and every request exactly once between
them, whatever N, and the requests of part i are known without talking to the others.

`--shard i/N` runs part i of every closed-loop cell in this process (0 ≤ i < N); N processes, on one host or
many, each started with the same arguments and its own i, together send the load of one process. To
start them together `--start-at T` (Unix time, or +S seconds from now) waits before the first cell, and
`--cell-period S` starts cell k at T + k·S (each shard logs when a cell ran over its period). `loadgen merge`
combines their results (docs/performance.md). `--run-id ID` gives the shards one run id, so their live
metrics carry the same `run` label and Prometheus `sum()` adds them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import time
from collections.abc import Sequence
from datetime import datetime

from loadgen.errors import UsageError
from loadgen.record import CellKey


def slot_counts(slots: int, parts: int) -> list[int]:
    """Slots of each part when slot s goes to part s mod `parts`: [len(range(i, slots, parts)) for each i]."""
    return [len(range(i, slots, parts)) for i in range(parts)]


def part_of(seq: int, slots: int, parts: int) -> int:
    """The part that sends request `seq`: the owner of slot seq mod slots."""
    return (seq % slots) % parts


class ShardJobs(Sequence):
    """The jobs of part `index` of `parts`, in order, as a view of a cell's full job sequence (lazy, so a
    duration-bound cell's million jobs stay unbuilt)."""

    def __init__(self, jobs: Sequence, slots: int, parts: int, index: int):
        self.jobs, self.slots = jobs, max(slots, 1)
        self.owned = list(range(index, self.slots, parts))  # slot numbers of this part within each period
        full, rest = divmod(len(jobs), self.slots)
        self.n = full * len(self.owned) + sum(1 for s in self.owned if s < rest)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.n))]
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError(k)
        period, j = divmod(k, len(self.owned))
        return self.jobs[period * self.slots + self.owned[j]]


def parse_shard(text: str) -> tuple[int, int]:
    """'2/8' → (2, 8): part 2 of 8, counted from 0 (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)."""
    try:
        i_s, n_s = text.split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise UsageError(f"--shard {text!r}: give i/N, e.g. 0/4 (i counts from 0)") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard {text!r}: need N ≥ 1 and 0 ≤ i < N")
    return i, n


def parse_start_at(text: str, now_s: float | None = None) -> float:
    """'+30' → now + 30 s; '1767225600' → that Unix time; '2026-01-01T00:00:00+00:00' → that instant."""
    now_s = time.time() if now_s is None else now_s
    try:
        if text.startswith("+"):
            return now_s + float(text[1:])
        try:
            return float(text)
        except ValueError:
            return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"--start-at {text!r}: give a Unix time, +SECONDS, or an ISO 8601 time") from None


def host_identity() -> dict:
    """Which clock the records' monotonic times are on: same boot_id = same CLOCK_MONOTONIC."""
    boot_id = None
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot_id = fh.read().strip()
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "boot_id": boot_id, "pid": os.getpid()}


# ---- plug-in -----------------------------------------------------------------------------------------------

def add_options(p: argparse.ArgumentParser) -> None:
    g = next((g for g in p._action_groups if g.title == "client"), None) or p.add_argument_group("client")
    g.add_argument("--shard", metavar="i/N", help="run part i (from 0) of N of every closed-loop cell: slot "
                   "s and "
                   "request j go to part s mod N and (j mod C) mod N; combine with `loadgen merge`")
    g.add_argument("--run-id", metavar="ID", help="run id (default: time + random); give shards one id")
    g.add_argument("--start-at", metavar="T",
                   help="wait until Unix time T (or +S seconds) before the first cell")
    g.add_argument("--cell-period", type=float, metavar="S",
                   help="with --start-at: start cell k at T + k·S, so shards on several hosts stay aligned")


def configure(a: argparse.Namespace, cfg) -> None:
    shard = parse_shard(a.shard) if a.shard else None
    if shard and (cfg.extras.get("request_rate") or cfg.extras.get("ramp")):
        raise UsageError("--shard splits closed-loop cells only; open-loop rates are not split across shards "
                         "yet")
    if a.run_id is not None and (not a.run_id or any(c in a.run_id for c in "/\\ \n\t")):
        raise UsageError(f"--run-id {a.run_id!r}: no spaces or slashes")
    start_at = parse_start_at(a.start_at) if a.start_at else None
    if a.cell_period is not None and (a.cell_period <= 0 or start_at is None):
        raise UsageError("--cell-period S needs S > 0 and --start-at")
    if shard and shard[1] > 1:
        # shards share no coordinator: only the wall clock keeps them on the same cell at the same time
        if start_at is None:
            raise UsageError("--shard i/N with N > 1 needs --start-at T (the same T for every shard), so "
                             "that "
                             "all shards start loading the server together")
        if len(cfg.contexts) * len(cfg.concurrency) > 1 and a.cell_period is None:
            raise UsageError("--shard with more than one cell needs --cell-period S (longer than the longest "
                             "cell, e.g. --duration-per-cell + the longest request), so shards start cell k "
                             "together")
    cfg.extras.update(shard=list(shard) if shard else None, run_id=a.run_id, start_at=start_at,
                      cell_period_s=a.cell_period)


def install(runner) -> None:
    x = runner.cfg.extras
    if x.get("run_id"):
        runner.run_id = x["run_id"]
    shard, start_at, period = x.get("shard"), x.get("start_at"), x.get("cell_period_s")
    setup, drive = runner.setup, runner.drive
    cells_started = [0]

    async def setup_with_identity(session) -> None:
        await setup(session)
        runner.doc["host"] = host_identity()
        if shard:
            runner.doc["shard"] = {"index": shard[0], "count": shard[1]}

    async def shard_drive(run, cell: CellKey) -> None:
        k = cells_started[0]
        cells_started[0] += 1
        if start_at is not None:
            await wait_until(start_at + (k * period if period else 0) if (period or k == 0) else None, k)
        if shard and cell.request_rate is None:
            i, n = shard
            slots = slot_counts(cell.concurrency, n)[i]
            run.jobs = ShardJobs(run.jobs, cell.concurrency, n, i)
            if slots == 0 or not len(run.jobs):
                return  # this part has no slot in a cell narrower than the shard count
            cell = CellKey(cell.context_tokens, slots, cell.request_rate)
        await drive(run, cell)

    warm_up = runner.warm_up

    async def shard_warm_up(run, cell: CellKey) -> None:
        """This shard's part of the warmup requests, through the same path as its measured load."""
        if not shard or cell.request_rate is not None:
            await warm_up(run, cell)
            return
        i, n = shard
        w = runner.cfg.warmup
        measure = run.jobs[w:]
        run.jobs = ShardJobs(run.jobs[:w], cell.concurrency, n, i)
        slots = slot_counts(cell.concurrency, n)[i]
        if slots and len(run.jobs):
            await drive(run, CellKey(cell.context_tokens, slots, cell.request_rate))
        run.jobs, run.next_job = measure, 0

    assemble, run = runner.assemble, runner.run

    def shard_assemble(cell: CellKey, summary: dict, results) -> dict:
        entry = assemble(cell, summary, results)
        if shard and cell.request_rate is None and slot_counts(cell.concurrency, shard[1])[shard[0]] == 0:
            # a cell narrower than the shard count: the other shards send all of it
            entry["status"] = "skipped"
            entry["error"] = (f"no slot for shard {shard[0]}/{shard[1]} in a cell of concurrency "
                              f"{cell.concurrency}")
            entry["shard_has_no_slot"] = True
        return entry

    async def shard_run() -> int:
        rc = await run()
        done = all(c["status"] == "ok" or c.get("shard_has_no_slot") for c in runner.cells)
        if rc == 1 and runner.cells and done:
            return 0  # this shard did all it had to do
        return rc

    runner.setup, runner.drive, runner.warm_up = setup_with_identity, shard_drive, shard_warm_up
    runner.assemble, runner.run = shard_assemble, shard_run


async def wait_until(t_s: float | None, k: int) -> None:
    if t_s is None:
        return
    delay = t_s - time.time()
    if delay < 0:
        if k:
            from loadgen.runner import log
            log(f"cell {k} starts {-delay:.1f} s after its --cell-period slot: the previous cell ran over")
        return
    await asyncio.sleep(delay)


def _register() -> None:
    from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
    OPTION_GROUPS.append(add_options)
    CONFIGURERS.append(configure)
    RUNNER_HOOKS.append(install)


_register()
