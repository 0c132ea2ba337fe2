"""Reading a timestamped trace (`--trace FILE`): when each request was sent, its prompt and output lengths.

Two formats, detected from the file:
- Mooncake (JSONL): `{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [h, ...]}`; hash id
  j names the j-th block of `BLOCK_TOKENS` prompt tokens, and rows that share a hash id share that block of
  prompt (a prefix cache may serve it).
- plain: the same without `hash_ids`, as JSONL or as CSV with a header naming `timestamp`, `input_length` and
  `output_length` (in any order; other columns are ignored).

Every unusable row is a `BadRow` named `FILE:LINE: reason` (workload.textfile); more than `--max-bad-rows`
stop the run before any load. Rows are sent in timestamp order; the first row is sent at the cell's start.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field

from loadgen.workload.dataset_formats import json_objects
from loadgen.workload.textfile import BadRow, WorkloadError, check_bad_rows, read_text

BLOCK_TOKENS = 512  # Mooncake's block of prompt tokens behind one hash id
FIELDS = ("timestamp", "input_length", "output_length")
TRACE_EXPECTED = "expected JSONL rows with timestamp (ms), input_length, output_length and optionally hash_ids, " \
                 "or CSV with those columns"


class RowError(ValueError):
    pass


@dataclass(frozen=True)
class TraceRow:
    """One request of the trace: sent at `timestamp_ms` after the trace's start, `input_length` prompt tokens
    (its first blocks named by `hash_ids`), `output_length` generated tokens."""

    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass
class Trace:
    path: str
    format: str  # "mooncake" | "plain JSONL" | "plain CSV"
    rows: list[TraceRow]
    bad: list[BadRow] = field(default_factory=list)

    @property
    def span_s(self) -> float:
        """Last timestamp − first, in seconds of the trace's own clock."""
        return (self.rows[-1].timestamp_ms - self.rows[0].timestamp_ms) / 1e3 if self.rows else 0.0

    def mean_rate(self, speed: float = 1.0) -> float:
        """The trace's mean request rate at `speed` = (rows − 1) / span × speed (rows per second when every
        row has the same timestamp)."""
        n = len(self.rows)
        return round((n - 1) / self.span_s * speed, 3) if self.span_s > 0 else float(n)

    def offsets_s(self, speed: float) -> list[float]:
        """Each row's send time after the first row's, at `speed` (2 = twice as fast): (t_i − t_0) / 1000 / speed."""
        t0 = self.rows[0].timestamp_ms if self.rows else 0.0
        return [(r.timestamp_ms - t0) / 1e3 / speed for r in self.rows]

    def describe(self) -> str:
        shared = sum(1 for r in self.rows if r.hash_ids)
        return (f"trace {self.path}: {self.format}, {len(self.rows)} rows ({len(self.bad)} bad) over "
                f"{self.span_s:.1f} s" + (f", {shared} with hash_ids" if shared else ""))


def _count(obj: dict, name: str, minimum: int) -> int:
    value = obj.get(name)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RowError(f"{name} {value!r} must be an integer ≥ {minimum}")
    return value


def _timestamp(obj: dict) -> float:
    value = obj.get("timestamp")
    try:
        t = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    except ValueError:
        t = math.nan
    if not (math.isfinite(t) and t >= 0):
        raise RowError(f"timestamp {value!r} must be a number of milliseconds ≥ 0")
    return t


def _hash_ids(obj: dict) -> tuple[int, ...]:
    ids = obj.get("hash_ids")
    if ids is None:
        return ()
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
        raise RowError("hash_ids must be a list of integers")
    return tuple(ids)


def parse_row(obj, line: int) -> TraceRow:
    """One row, or RowError with the reason."""
    if not isinstance(obj, dict):
        raise RowError("not a JSON object")
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise RowError(f"no {', '.join(missing)} ({TRACE_EXPECTED})")
    row = TraceRow(line, _timestamp(obj), _count(obj, "input_length", 1), _count(obj, "output_length", 1),
                   _hash_ids(obj))
    if len(row.hash_ids) > math.ceil(row.input_length / BLOCK_TOKENS):
        raise RowError(f"{len(row.hash_ids)} hash_ids name more {BLOCK_TOKENS}-token blocks than input_length "
                       f"{row.input_length} holds")
    return row


def _csv_objects(text: str) -> tuple[list[tuple[int, object]], list[BadRow]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [f for f in FIELDS if f not in (reader.fieldnames or ())]
    if missing:
        return [], [BadRow(1, f"CSV header has no {', '.join(missing)} ({TRACE_EXPECTED})")]
    return [(reader.line_num, dict(row)) for row in reader], []


def parse_trace(text: str) -> tuple[str, list[TraceRow], list[BadRow]]:
    """(format, usable rows in timestamp order, bad rows) of a trace file's text."""
    is_json = text.lstrip().startswith(("{", "["))
    items, bad = json_objects(text) if is_json else _csv_objects(text)
    rows = []
    for line, obj in items:
        try:
            rows.append(parse_row(obj, line))
        except RowError as exc:
            bad.append(BadRow(line, str(exc)))
    fmt = "plain CSV" if not is_json else "Mooncake JSONL" if any(r.hash_ids for r in rows) else "plain JSONL"
    rows.sort(key=lambda r: (r.timestamp_ms, r.line))
    bad.sort(key=lambda b: b.line)
    return fmt, rows, bad


def load_trace(path: str, max_bad_rows: int = 0, quiet: bool = False) -> Trace:
    """The trace's usable rows, its bad rows named on the console (unless `quiet`); WorkloadError when the file
    is not text, has no usable row or more than `max_bad_rows` bad ones."""
    fmt, rows, bad = parse_trace(read_text(path, "--trace"))
    check_bad_rows("--trace", path, bad, len(rows), max_bad_rows, quiet, expected=TRACE_EXPECTED)
    return Trace(path, fmt, rows, bad)


__all__ = ["BLOCK_TOKENS", "Trace", "TraceRow", "WorkloadError", "load_trace", "parse_trace"]
