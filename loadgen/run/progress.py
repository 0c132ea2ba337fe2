"""The progress line of the current cell on stderr (only on a terminal): requests done and live tok/s."""

from __future__ import annotations

import asyncio
import sys
import time

from loadgen.record import Record

REDRAW_S = 0.5


class Progress:
    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0
        self.total = 0
        self.tokens = 0
        self.t0 = time.monotonic()
        self.label = ""

    def reset(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.tokens, self.t0 = label, total, 0, 0, time.monotonic()

    def add(self, rec: Record) -> None:
        self.done += 1
        self.tokens += rec.completion_tokens or 0

    def draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        frac = self.done / self.total if self.total else 0.0
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        rate = self.tokens / max(time.monotonic() - self.t0, 1e-9)
        sys.stderr.write(f"\r  {self.label:<22} [{bar}] {self.done}/{self.total} req  {rate:8.1f} tok/s ")
        sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()

    async def redraw(self) -> None:
        """Redraw every 0.5 s until cancelled."""
        while True:
            self.draw()
            await asyncio.sleep(REDRAW_S)
