"""How a sweep configuration's measurement ended is stored as a kind (`sweep.attempts[].failure`,
`interrupted_by`), which the tune reads, never its reason's words: a run that refuses its arguments, one that
raises, a server that is not the `expect`ed one, an interrupt, and a clean end."""

from __future__ import annotations

import asyncio
import signal
from types import SimpleNamespace

import pytest

from loadgen.errors import UsageError
from loadgen.names import MeasureFailure
from loadgen.sweep.runner import StopSweep, _measure

pytestmark = pytest.mark.unit


class Runner:
    """The part of a Runner `_measure` reads: `run()`, its sinks, the target it measured."""

    def __init__(self, outcome, server_info: dict | None = None):
        self.outcome = outcome
        self.parts = SimpleNamespace(sinks=[])
        self.target = SimpleNamespace(server_info=server_info or {"speculative_ddtree_budget": 8})

    async def run(self) -> int:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def measure(runner: Runner, expect: dict | None = None):
    async def go():
        return await _measure(runner, SimpleNamespace(expect=expect or {}), StopSweep())
    return asyncio.run(go())


def test_each_way_a_measurement_ends_is_a_kind():
    assert measure(Runner(0)) == (None, None)
    refused = measure(Runner(UsageError("--contexts 9000: longer than the server's 4096")))
    assert refused == (MeasureFailure.COULD_NOT_START,
                       "measurement could not start: --contexts 9000: longer than the server's 4096")
    kind, reason = measure(Runner(RuntimeError("boom")))
    assert (kind, reason) == (MeasureFailure.CRASHED, "measurement crashed: RuntimeError: boom")
    kind, reason = measure(Runner(0), expect={"speculative_ddtree_budget": 16})
    assert kind is MeasureFailure.NOT_AS_EXPECTED and reason.startswith("the server measured does not match expect")
    assert measure(Runner(128 + signal.SIGINT)) == (None, "interrupted by SIGINT")  # an interrupt is no failure
