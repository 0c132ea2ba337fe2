"""The sink interface. Records flow one way: the scheduler hands each finished `Record` to every sink, and the
runner each finished cell's typed result (`CellResult`); a sink that writes the cell as JSON calls its `to_json`.

The run's sinks, chosen in `loadgen/cli/assemble.py`: the JSONL records (`loadgen/sinks/jsonl.py`), the
server-down guard (`loadgen/run/server_down.py`, which watches outcomes), the live exporter
(`exporters/live.py`) and the console (`loadgen/report/console_sink.py`: a line per finished cell, the tables
after the run).

Sinks must be cheap per call (they run on the event loop between requests) and must raise when a write
fails: a benchmark that silently stops writing is worse than one that stops.
"""

from __future__ import annotations

from typing import Protocol

from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult


class Sink(Protocol):
    def run_started(self, run_id: str, cells: int | None) -> None:
        """The run's cells begin: how many it measures (None: its plan decides as it goes)."""

    def cell_started(self, cell: CellKey, run_id: str) -> None:
        """A cell's load begins (warmup included)."""

    def request_sent(self, cell: CellKey) -> None:
        """A request left the client (for in-flight gauges)."""

    def record(self, rec: Record) -> None:
        """A request ended, whatever the outcome. Called exactly once per scheduled request."""

    def repeat_finished(self, cell: CellKey, result: CellResult, repeat: int) -> None:
        """One of `--repeat`'s measurements of the cell (`repeat`, from 1) is final; the cell that combines
        them follows (`cell_finished`). Not called for a cell measured once."""

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        """The cell's result (its `cells[]` entry in the results file, telemetry included) is final. A cell
        measured again outside the matrix (`run/remeasure.py`) is told too, under its own run id
        (`<run id>-<tag>`)."""

    def close(self) -> None:
        """The run is over."""


class NullSink:
    """Implements every hook as a no-op, for sinks that care about a few of them."""

    def run_started(self, run_id: str, cells: int | None) -> None:
        pass

    def cell_started(self, cell: CellKey, run_id: str) -> None:
        pass

    def request_sent(self, cell: CellKey) -> None:
        pass

    def record(self, rec: Record) -> None:
        pass

    def repeat_finished(self, cell: CellKey, result: CellResult, repeat: int) -> None:
        pass

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        pass

    def close(self) -> None:
        pass
