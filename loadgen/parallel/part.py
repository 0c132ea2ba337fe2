"""What `dispatch.Dispatch` drives in a cell: a worker process (`workers.Worker`) or a Ray actor
(`ray_worker.RayWorker`), each part of the cell's slots behind the same few calls."""

from __future__ import annotations

from typing import Protocol

from loadgen.parallel import wire


class Part(Protocol):
    index: int  # 1..N, the records' `worker`
    slots: int  # its share of the cell's concurrency
    result: dict | None  # its client figures, once it said Done

    def send(self, msg: wire.Message) -> None: ...

    async def recv(self) -> wire.Message | None:
        """The next message; None when its stream ended."""
        ...

    async def ended(self) -> None:
        """Its stream ended: learn why (for `gone`)."""
        ...

    def gone(self) -> str:
        """Why it is gone, in one line."""
        ...
