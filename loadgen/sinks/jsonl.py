"""Per-request JSONL: one line per scheduled request, flushed to the OS as the request ends, so a killed
run loses at most the requests still in flight."""

from __future__ import annotations

import orjson

from loadgen.record import Record
from loadgen.sinks.base import NullSink


def requests_path(results_path: str) -> str:
    base = results_path[:-5] if results_path.endswith(".json") else results_path
    return base + ".requests.jsonl"


class JsonlSink(NullSink):
    def __init__(self, path: str, append: bool = False):
        self.path = path
        self._fh = open(path, "ab" if append else "wb")

    def record(self, rec: Record) -> None:
        self._fh.write(orjson.dumps(rec.to_dict()) + b"\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
