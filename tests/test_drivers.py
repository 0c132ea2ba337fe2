"""Drivers and the schedule they drive, without sockets: each wrapper routes warm_up and drive through its own
logic to the driver it wraps (a recording inner driver), the closed loop sends the warmup then the measured
jobs, a stop token ends a load early, and the outcome says what was not sent and why."""

from __future__ import annotations

import asyncio
import time

import pytest

from loadgen.config import RunConfig
from loadgen.names import Phase
from loadgen.parallel.shard import AlignedStart, ShardPart
from loadgen.parallel.worker_driver import WorkerDriver
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import amended
from loadgen.results.cell_result import CellResult
from loadgen.results.findings import CellFindings
from loadgen.run.drivers import ClosedLoop
from loadgen.schedule.cell_run import DEADLINE, CellRun, StopToken
from loadgen.schedule.closed import closed_loop
from loadgen.schedule.feed import JobFeed
from loadgen.schedule.jobs import Job, JobList
from loadgen.schedule.split import ShardJobs

pytestmark = pytest.mark.unit

CELL = CellKey(60, 4)


async def _ok(body: dict, rec: Record) -> Record:
    rec.t_sent_ns = time.monotonic_ns()
    await asyncio.sleep(0)
    rec.t_end_ns, rec.outcome = time.monotonic_ns(), "ok"
    return rec


def _run(n: int = 10, warmup: int = 2, stop: StopToken | None = None, deadline_ns: int | None = None,
         records: list | None = None) -> CellRun:
    jobs = JobList([{"i": i} for i in range(n)], n, warmup)
    out = records if records is not None else []
    return CellRun("r", CELL, jobs, _ok, lambda: None, out.append, deadline_ns, warmup=warmup, stop=stop)


class Recorder:
    """An inner driver that sends nothing and writes down what it was asked to send."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int], CellKey]] = []

    def planned_requests(self, cell: CellKey) -> int:
        return 99

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        self.calls.append(("warm_up", _seqs(run.phase(Phase.WARMUP)), cell))

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        self.calls.append(("drive", _seqs(run.phase(Phase.MEASURE)), cell))

    def finish(self, cell: CellKey, measured) -> CellFindings:
        return CellFindings(warnings=("inner finished",))


def _seqs(run: CellRun) -> list[int]:
    seqs = []
    while (job := run.take()) is not None:
        seqs.append(job.seq)
    return seqs


def test_shard_part_gives_the_inner_driver_its_share_of_each_phase():
    inner = Recorder()
    shard = ShardPart(inner, 1, 2)  # slots 1 and 3 of 4
    run = _run(n=12, warmup=3)
    asyncio.run(shard.warm_up(run, CELL))
    asyncio.run(shard.drive(run, CELL))
    jobs = JobList([{}] * 12, 12, 3)
    assert inner.calls == [
        ("warm_up", [j.seq for j in ShardJobs(jobs[:3], 4, 2, 1)], CellKey(60, 2)),
        ("drive", [j.seq for j in ShardJobs(jobs[3:], 4, 2, 1)], CellKey(60, 2)),
    ]
    assert shard.planned_requests(CELL) == 99
    result = amended(CellResult(CELL), shard.finish(CELL, []))
    assert result.warnings == ["inner finished"] and result.incidents == []


def test_shard_part_without_a_slot_sends_nothing_and_says_why():
    inner = Recorder()
    shard = ShardPart(inner, 3, 4)
    narrow = CellKey(60, 2)
    asyncio.run(shard.warm_up(_run(), narrow))
    asyncio.run(shard.drive(_run(), narrow))
    assert inner.calls == []
    result = amended(CellResult(narrow), shard.finish(narrow, []))
    assert result.status == "skipped" and result.load.shard_has_no_slot and result.warnings == ["inner finished"]
    assert result.error == "no slot for shard 3/4 in a cell of concurrency 2"


def test_aligned_start_waits_before_the_measured_load_only():
    inner = Recorder()
    start_at = time.time() + 0.3
    aligned = AlignedStart(inner, start_at, None)
    run = _run()
    t0 = time.time()
    asyncio.run(aligned.warm_up(run, CELL))
    assert time.time() < start_at and inner.calls[0][0] == "warm_up"  # the warmup did not wait
    asyncio.run(aligned.drive(run, CELL))
    assert time.time() >= start_at > t0 and [c[0] for c in inner.calls] == ["warm_up", "drive"]
    assert aligned.cells_started == 1 and aligned.planned_requests(CELL) == 99


class FakePool:
    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.problems: dict = {}
        self.cells: list[list[int]] = []

    async def run_cell(self, run: CellRun, cell: CellKey) -> list[dict]:
        self.cells.append(_seqs(run))
        return [{"worker": 1}]


def test_worker_driver_sends_both_phases_over_the_pool():
    inner, pool = Recorder(), FakePool()
    driver = WorkerDriver(inner, pool)
    run = _run(n=6, warmup=2)
    asyncio.run(driver.warm_up(run, CELL))
    asyncio.run(driver.drive(run, CELL))
    assert pool.cells == [[0, 1], [2, 3, 4, 5]] and inner.calls == []
    assert driver.per_worker == {CELL: [{"worker": 1}]}  # the measured load's figures, not the warmup's


def test_worker_driver_falls_back_to_the_inner_driver_once_the_pool_broke():
    inner, pool = Recorder(), FakePool(broken=True)
    driver = WorkerDriver(inner, pool)
    run = _run(n=6, warmup=2)
    asyncio.run(driver.warm_up(run, CELL))
    asyncio.run(driver.drive(run, CELL))
    assert pool.cells == [] and inner.calls == [("warm_up", [0, 1], CELL), ("drive", [2, 3, 4, 5], CELL)]


class NoTransport:
    def __init__(self) -> None:
        self.warmed: list[int] = []

    async def warm(self, connections: int) -> None:
        self.warmed.append(connections)


def test_closed_loop_sends_the_warmup_then_the_measured_jobs():
    records: list[Record] = []
    run = _run(n=10, warmup=3, records=records)
    transport = NoTransport()
    driver = ClosedLoop(RunConfig(url=None).size, transport)
    asyncio.run(driver.warm_up(run, CELL))
    assert [r.seq for r in records] == [0, 1, 2] and all(r.phase == "warmup" for r in records)
    asyncio.run(driver.drive(run, CELL))
    assert sorted(r.seq for r in records) == list(range(10)) and transport.warmed == [4, 4]
    outcome = run.cell_outcome()
    assert (outcome.sent, outcome.in_flight, outcome.measured_not_sent, outcome.stopped_by) == (10, 0, 0, None)


def test_a_stop_token_ends_the_load_and_the_outcome_says_what_was_not_sent():
    run_token = StopToken()
    records: list[Record] = []
    run = _run(n=10, warmup=0, stop=StopToken(run_token), records=records)

    async def pause(rec: Record) -> None:
        if len(records) == 3:
            run_token.stop("not measured: interrupted by SIGINT")

    asyncio.run(closed_loop(run.phase(Phase.MEASURE), 1, pause))
    outcome = run.cell_outcome()
    assert len(records) == 3 and outcome.sent == 3
    assert outcome.measured_not_sent == 7 and [j.seq for j in outcome.unsent] == list(range(3, 10))
    assert outcome.stopped_by == "not measured: interrupted by SIGINT"


def test_a_token_keeps_its_first_reason_and_follows_those_it_is_linked_to():
    run_token, own = StopToken(), StopToken()
    cell_token = StopToken(run_token, own)
    assert not cell_token.stopped
    own.stop("the server went away")
    assert cell_token.stopped and cell_token.reason == "the server went away"
    run_token.stop("interrupted")
    own.stop("again")
    assert own.reason == "the server went away"  # the first reason is kept
    assert cell_token.reason == "interrupted"  # the linked ones in the order given
    cell_token.stop("its own")
    assert cell_token.reason == "its own"  # its own reason before any linked one
    assert not StopToken().stopped


def test_the_deadline_ends_a_closed_loop_but_not_an_untimed_view():
    past = time.monotonic_ns() - 1
    run = _run(n=5, warmup=0, deadline_ns=past)
    assert run.phase(Phase.MEASURE).take() is None
    assert run.cell_outcome().stopped_by == DEADLINE
    assert run.untimed().take().seq == 0


def test_a_feed_hands_jobs_as_they_arrive_and_puts_back_one_past_the_deadline():
    async def scenario():
        feed = JobFeed()
        got = asyncio.ensure_future(feed.get())
        await asyncio.sleep(0)
        feed.add(Job(0, "measure", {}))
        assert (await got).seq == 0
        feed.add(Job(1, "measure", {}))
        feed.add(Job(2, "measure", {}))
        feed.end(drop=True)
        assert await feed.get() is None and [j.seq for j in feed.unsent()] == [1, 2]
        late = JobFeed(deadline_ns=time.monotonic_ns() - 1)
        late.add(Job(3, "measure", {}))
        assert await late.get() is None and late.timed_out and [j.seq for j in late.unsent()] == [3]

    asyncio.run(scenario())


def test_a_worker_cell_runs_its_slots_through_the_closed_loop_over_a_feed():
    async def scenario():
        feed = JobFeed()
        records: list[Record] = []
        run = CellRun("r", CELL, feed, _ok, lambda: None, records.append)
        load = asyncio.ensure_future(closed_loop(run, 2))
        for seq in range(5):
            feed.add(Job(seq, "measure", {}))
            await asyncio.sleep(0)
        feed.end()
        outcome = await load
        assert sorted(r.seq for r in records) == list(range(5)) and outcome.sent == 5 and not outcome.unsent

    asyncio.run(scenario())


def test_a_duration_bound_cell_counts_its_duration_from_the_measured_load_start():
    """A measured load that waited (an aligned start, a long warmup) still sends for its whole duration: the
    deadline moves to when the measured jobs start; the warmup keeps the deadline set when the cell began."""
    jobs = JobList([{"i": i} for i in range(10)], 10, 2)
    start = time.monotonic_ns()
    run = CellRun("r", CELL, jobs, _ok, lambda: None, lambda rec: None, start + 1, warmup=2, duration_ns=10**12)
    assert run.phase(Phase.WARMUP).deadline_ns == start + 1  # set when the cell began
    time.sleep(0.01)  # the wait: without the move, the measured load would start past its deadline
    measured = run.phase(Phase.MEASURE)
    assert measured.deadline_ns is not None and measured.deadline_ns >= start + 10**12
    assert measured.take() is not None
    plain = _run(deadline_ns=start + 1)  # no duration: the deadline as given
    assert plain.phase(Phase.MEASURE).deadline_ns == start + 1
