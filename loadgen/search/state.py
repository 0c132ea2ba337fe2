"""Where a search stands, for whoever watches it live (the exporter's `loadgen_search_*` gauges, docs/metrics.md):
one value per prompt length, made from the walk's bracket so far (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from loadgen.search.walk import Bracket


@dataclass(frozen=True)
class SearchState:
    """The search of one prompt length: the load being probed (None between probes), the bracket's met and missed
    ends so far, the answer once it is known (None before, and when there is none), the cells measured and
    whether the control probe found the server drifted."""

    context: int
    over: str
    probe: float | None
    met: float | None
    missed: float | None
    answer: float | None
    cells: int
    drifted: bool


def state_of(b: Bracket, context: int, over: str, probe: float | None) -> SearchState:
    answer = b.met if b.complete and b.drift is None else None
    return SearchState(context, str(over), probe, b.met, b.missed, answer, len(b.probes), b.drift is not None)


class SearchWatcher(Protocol):
    def search_state(self, state: SearchState) -> None:
        """The search's state changed (a probe starts, a cell was measured, the answer is known)."""
