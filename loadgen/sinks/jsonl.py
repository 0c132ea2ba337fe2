"""Per-request JSONL: one line per scheduled request, flushed to the OS as the request ends, so a killed
run loses at most the requests still in flight."""

from __future__ import annotations

import orjson

from loadgen.record import Record
from loadgen.sinks.base import NullSink


class JsonlSink(NullSink):
    """Opened when the first cell starts, not before: a run that stops on bad input (exit 2) must not
    truncate the records of an earlier run written to the same path. Every line is the record (which carries
    its `run_id`) plus the run's `label`, so a line read on its own says which run it belongs to."""

    def __init__(self, path: str, append: bool = False, label: str | None = None):
        self.path = path
        self.append = append
        self.label = label
        self._fh = None

    def _open(self):
        if self._fh is None:
            self._fh = open(self.path, "ab" if self.append else "wb")
        return self._fh

    def cell_started(self, cell, run_id: str) -> None:
        self._open()

    def record(self, rec: Record) -> None:
        fh = self._open()
        fh.write(orjson.dumps(rec.to_dict() | {"label": self.label}) + b"\n")
        fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
