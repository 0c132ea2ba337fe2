"""The tune's budget: cells measured and GPU time spent (the wall time of every visit: the restart, the
readiness wait, the cells), against `[tune] max_cells` and `max_gpu_minutes`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Budget:
    """What was spent before the visit under way (`cells`, `spent_s`) and since it started (`started`, monotonic s)."""

    max_cells: int | None
    max_gpu_minutes: float | None
    cells: int = 0
    spent_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def spent_now_s(self) -> float:
        return self.spent_s + time.monotonic() - self.started

    def why_not(self) -> str | None:
        """Why nothing more may be measured ('max_cells 40 reached'), or None while the budget allows a cell."""
        if self.max_cells is not None and self.cells >= self.max_cells:
            return f"max_cells {self.max_cells} reached"
        if self.max_gpu_minutes is not None and self.spent_now_s() >= self.max_gpu_minutes * 60:
            return f"max_gpu_minutes {self.max_gpu_minutes:g} spent"
        return None
