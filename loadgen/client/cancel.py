"""Requests the client closes on purpose (`--cancel-fraction F` with `--cancel-after S` or
`--cancel-after-tokens N`), as users abandon answers they no longer want.

Which: measured request `seq` is chosen when ⌊(seq + 1)·F + φ⌋ − ⌊seq·F + φ⌋ = 1, φ ∈ [0, 1) drawn once from
--seed: evenly spread, exactly ⌊n·F⌋ or ⌈n·F⌉ of any n consecutive requests, the same ones on every run.

How: `--cancel-after S` cancels the send S seconds after it began (the sender aborts its connection, as on
an interrupt); `--cancel-after-tokens N` hands the limit to the stream recorder through the record
(`Record.abandon_after_tokens`), which stops reading, and the sender closes the stream, once N output tokens
arrived. Either way the record's outcome is `abandoned`: counted apart, never a failure. A chosen request
whose answer ends before the limit is an ordinary ok request.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

from loadgen.names import Outcome, Phase
from loadgen.record import Record

SendFn = Callable[[dict, Record], Awaitable[Record]]


def chosen(seq: int, fraction: float, phase: float) -> bool:
    """Whether request `seq` is one of the `fraction` to close: ⌊(seq + 1)·F + φ⌋ − ⌊seq·F + φ⌋ = 1."""
    return math.floor((seq + 1) * fraction + phase) - math.floor(seq * fraction + phase) == 1


class CancellingSender:
    """Sends through `send`, closing the chosen measured requests' streams after `after_s` seconds or
    `after_tokens` tokens (one of them is given)."""

    def __init__(self, send: SendFn, fraction: float, phase: float, after_s: float | None = None,
                 after_tokens: int | None = None):
        self.send, self.fraction, self.phase = send, fraction, phase
        self.after_s, self.after_tokens = after_s, after_tokens

    async def __call__(self, body: dict, rec: Record) -> Record:
        if rec.phase != Phase.MEASURE or not chosen(rec.seq, self.fraction, self.phase):
            return await self.send(body, rec)
        if self.after_tokens is not None:
            rec.abandon_after_tokens = self.after_tokens
            return await self.send(body, rec)
        task = asyncio.ensure_future(self.send(body, rec))
        try:
            done, _ = await asyncio.wait({task}, timeout=self.after_s)
        except asyncio.CancelledError:  # the load itself was cancelled: so is this request
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        rec.outcome = Outcome.ABANDONED
        rec.error = f"closed by the client {self.after_s:g} s after the send (--cancel-after)"
        return rec
