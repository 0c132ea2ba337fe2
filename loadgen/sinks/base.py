"""The sink interface. Records flow one way: the scheduler hands each finished `Record` to every sink, and the
runner each finished cell's typed result (`CellResult`); a sink that writes the cell as JSON calls its `to_json`.

The run's sinks, chosen in `loadgen/cli/assemble.py`: the JSONL records (`loadgen/sinks/jsonl.py`), the
server-down guard (`loadgen/run/server_down.py`, which watches outcomes) and the live exporter
(`exporters/live.py`).

Sinks must be cheap per call (they run on the event loop between requests) and must raise when a write
fails: a benchmark that silently stops writing is worse than one that stops.
"""

from __future__ import annotations

from typing import Protocol

from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult


class Sink(Protocol):
    def cell_started(self, cell: CellKey, run_id: str) -> None:
        """A cell's load begins (warmup included)."""

    def request_sent(self, cell: CellKey) -> None:
        """A request left the client (for in-flight gauges)."""

    def record(self, rec: Record) -> None:
        """A request ended, whatever the outcome. Called exactly once per scheduled request."""

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        """The cell's result (its `cells[]` entry in the results file, telemetry included) is final."""

    def close(self) -> None:
        """The run is over."""


class NullSink:
    """Implements every hook as a no-op, for sinks that care about a few of them."""

    def cell_started(self, cell: CellKey, run_id: str) -> None:
        pass

    def request_sent(self, cell: CellKey) -> None:
        pass

    def record(self, rec: Record) -> None:
        pass

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        pass

    def close(self) -> None:
        pass
