"""Multi-turn sessions under a closed loop (`--sessions`): C slots, each running one session at a time, its
turns one after another. Concurrency counts sessions (users), not requests.

A slot takes the next session (a job whose body holds its `SessionPlan`), sends turn 0, and sends turn k + 1
once turn k's answer has arrived and the turn's think time has passed, with the server's answer in the
history (`workload.sessions.Conversation`). Turn k + 1's intended send time is the end of turn k plus the
think time (the wait is the user's, not the client's). A turn that did not end ok ends its session (there is
no answer to go on from); a stop ends every session at its next turn. Turn k of session s is request
s · MAX_TURNS + k.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from loadgen.schedule.cell_run import CellRun, LoadOutcome
from loadgen.schedule.jobs import Job
from loadgen.schedule.open import sleep_until
from loadgen.workload.sessions import MAX_TURNS, Conversation


async def run_session(run: CellRun, ticket: Job) -> int:
    """Send the session's turns in order; the number of turns sent."""
    talk = Conversation(ticket.body["session"])
    due_ns = 0
    for k in range(talk.turns):
        if k:
            due_ns += round(talk.plan.think_s[k] * 1e9)
            await sleep_until(run, due_ns)
            if run.stopped:
                return k
        job = Job(seq=ticket.seq * MAX_TURNS + k, phase=ticket.phase, body=talk.body(k), session=ticket.seq,
                  turn=k)
        rec = await run.issue(job, due_ns or time.monotonic_ns())
        if not rec.ok:
            return k + 1
        talk.answered(k, rec.answer or "")
        due_ns = rec.t_end_ns
    return talk.turns


def turns(jobs: Sequence[Job]) -> int:
    """The requests the sessions `jobs` will send: one per user turn."""
    return sum(len(job.body["session"].users) for job in jobs)


async def session_loop(run: CellRun, slots: int) -> LoadOutcome:
    """`slots` sessions in flight until the run has no session left or is stopped."""
    async def slot() -> None:
        while (ticket := await run.next_job()) is not None:
            await run_session(run, ticket)

    await asyncio.gather(*(slot() for _ in range(slots)))
    return run.outcome()
