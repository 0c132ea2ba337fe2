"""The one record type: one `Record` per scheduled request, whatever its outcome.

Every time is an integer nanosecond reading of the monotonic clock (`time.monotonic_ns`); a run keeps
one wall-clock anchor so the JSONL can be placed in calendar time (`RunAnchor`). CLOCK_MONOTONIC is
system-wide on Linux, so times taken by the simulator in another process compare directly.
"""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from loadgen.names import Outcome, Phase, values

OUTCOMES = values(Outcome)  # the order of the results' `by_outcome` (plain strings: they are its keys)


class CellKey(NamedTuple):
    """A cell of the matrix: one prompt length under one load level; what identifies a cell everywhere
    (results files, records, resume, compare, merge; `cell_key` reads it from either).

    Closed loop sets `concurrency`; open loop sets `request_rate` (and `concurrency` is its cap, 0 = none).
    `again` > 0 names the same load measured again (`loadgen search` re-measures a probe; 0: the first, the
    only one of a matrix): its own cell, records and prompts. Keys sort by prompt length, concurrency, rate
    (a closed-loop cell, without one, first), then `again`.
    """

    context_tokens: int
    concurrency: int
    request_rate: float | None = None
    again: int = 0

    def _order(self) -> tuple:
        rate = -1.0 if self.request_rate is None else self.request_rate
        return self.context_tokens, self.concurrency, rate, self.again

    def __lt__(self, other: tuple) -> bool:
        return self._order() < CellKey(*other)._order()

    def __le__(self, other: tuple) -> bool:
        return self._order() <= CellKey(*other)._order()

    def __gt__(self, other: tuple) -> bool:
        return self._order() > CellKey(*other)._order()

    def __ge__(self, other: tuple) -> bool:
        return self._order() >= CellKey(*other)._order()

    def as_dict(self) -> dict:
        d: dict[str, int | float] = {"context_tokens": self.context_tokens, "concurrency": self.concurrency}
        if self.request_rate is not None:
            d["request_rate"] = self.request_rate
        if self.again:
            d["again"] = self.again
        return d

    def label(self) -> str:
        load = f"rate={self.request_rate:g}/s" if self.request_rate is not None else f"c={self.concurrency}"
        return f"ctx={self.context_tokens} {load}" + (f" #{self.again + 1}" if self.again else "")

    def first(self) -> CellKey:
        """The same load's first measurement (`again` 0)."""
        return self._replace(again=0)


def load_tag(cell: CellKey) -> str:
    """The load in request ids and prompt tags: the concurrency, or `CrR` for an open-loop rate R capped at C;
    `aN` after it for the N-th measurement again."""
    load = str(cell.concurrency) if cell.request_rate is None else f"{cell.concurrency}r{cell.request_rate:g}"
    return load + (f"a{cell.again}" if cell.again else "")


def request_id_for(run_id: str, cell: CellKey, seq: int, attempt: int = 0) -> str:
    """The id loadgen gives request `seq` of a cell: `run-context-load-seq` (load: `load_tag`), with `-aN` for
    attempt N > 0."""
    return request_id_prefix(run_id, cell) + request_id_tail(seq, attempt)


def request_id_prefix(run_id: str, cell: CellKey) -> str:
    """What the ids of a cell's requests start with (`request_id_for`): `run-context-load-`."""
    return f"{run_id}-{cell.context_tokens}-{load_tag(cell)}-"


def request_id_tail(seq: int, attempt: int = 0) -> str:
    """What follows `request_id_prefix` in the id of request `seq`, attempt `attempt` (`request_id_for`)."""
    return f"{seq}-a{attempt}" if attempt else f"{seq}"


def cell_key(cell: dict) -> CellKey:
    """The cell that a results entry, a record's `cell` or a sweep's cell names."""
    rate = cell.get("request_rate")
    return CellKey(int(cell["context_tokens"]), int(cell["concurrency"]), None if rate is None else float(rate),
                   int(cell.get("again") or 0))


class _ChunksElsewhere(array):
    """The type of `CHUNKS_ELSEWHERE` (an empty array, so that code that only iterates reads no chunks)."""


CHUNKS_ELSEWHERE = _ChunksElsewhere("q")
"""In place of a kept record's per-chunk lists (both fields; `chunk_tokens` stays None when it was None): the
lists went whole to every sink, were folded into the cell's per-chunk figures (`metrics.chunk_fold`) and lie
in the cell's spill file (`run/chunk_spill.py`), found by the record's `seq`."""


def chunks_elsewhere(r: "Record") -> bool:
    """Whether the record's per-chunk lists were moved out (`CHUNKS_ELSEWHERE`)."""
    return r.chunk_gaps_ns is CHUNKS_ELSEWHERE


@dataclass(slots=True)
class Record:
    """What happened to one scheduled request.

    `chunk_tokens[i]` is the number of tokens the i-th content chunk carried (from the server's cumulative
    counts; None when the server gives only a final total). `chunk_gaps_ns[i]` is the time between content
    chunk i and i+1, so per-token inter-token latency is `chunk_gaps_ns[i] / chunk_tokens[i+1]`, repeated
    `chunk_tokens[i+1]` times; a chunk with no tokens hands its gap on to the next (`metrics.request.itl_pairs`).
    """

    run_id: str
    cell: CellKey
    seq: int
    phase: Phase = Phase.MEASURE
    request_id: str = ""
    t_intended_ns: int = 0
    t_sent_ns: int = 0
    t_first_byte_ns: int | None = None
    t_first_token_ns: int | None = None
    t_last_token_ns: int | None = None
    t_end_ns: int = 0
    outcome: Outcome = Outcome.OK
    status: int | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens the server's prefix cache served (None: not reported)
    chunks: int = 0
    chunk_tokens: list[int] | array[int] | None = field(default_factory=list)
    chunk_gaps_ns: list[int] | array[int] = field(default_factory=list)
    spec: dict | None = None
    worker: int = 0
    category: str | None = None  # the dataset row's category (--dataset), for per-category figures
    attempt: int = 0  # 0, or n when the cell was measured again after the server came back (--on-server-down wait)
    repeat: int = 0  # --repeat N: which of the cell's N measurements (0 … N − 1) the request belongs to
    retried_on_new_connection: int = 0  # 1 when a reused connection had been closed by the server (client/h1_sender.py)
    abandon_after_tokens: int | None = None  # --cancel-after-tokens: the client closes the stream at this many tokens
    session: int | None = None  # --sessions: the session this request is a turn of
    turn: int | None = None  # --sessions: the turn's index in its session, from 0
    answer: str | None = None  # --sessions: the answer's text (the next turn's history), kept for turns only
    t_first_reasoning_ns: int | None = None  # the first chunk of reasoning (reasoning_content / reasoning deltas)
    t_first_answer_ns: int | None = None  # the first chunk of the answer itself (content deltas)
    reasoning_tokens: int | None = None  # the answer's reasoning tokens (the server's count; None: no reasoning)
    verify: dict | None = None  # a verification request's verdict (--verify; metrics.correctness.verdict)

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK  # a member, or its string from code that writes strings

    def to_dict(self) -> dict:
        """The record as plain data (for JSON). Lists and `spec` are shared, not copied: `dataclasses.asdict`
        deep-copies every element, ~140 µs for a 128-chunk record, paid once per request by every sink."""
        d = {name: getattr(self, name) for name in _RECORD_FIELDS}
        d["cell"] = self.cell.as_dict()
        for name in ("chunk_tokens", "chunk_gaps_ns"):
            if isinstance(d[name], array):
                d[name] = d[name].tolist()
        return d

    def compact(self) -> "Record":
        """Keep the per-chunk lists as machine integers (8 bytes a gap and a count, instead of ~36 as Python ints
        in a list), for records a cell holds until its summary; same values, same iteration (and arrays of one
        type copy into each other without a conversion per value)."""
        if isinstance(self.chunk_gaps_ns, list):
            self.chunk_gaps_ns = _int64(self.chunk_gaps_ns)
        if isinstance(self.chunk_tokens, list):
            self.chunk_tokens = _int64(self.chunk_tokens)
        return self

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        d = dict(d)
        d.pop("label", None)  # the run's, added to each JSONL line by the sink
        d["cell"] = CellKey(**d["cell"])
        return cls(**d)


_RECORD_FIELDS = tuple(f.name for f in fields(Record))


_PACKERS: dict[int, Callable[..., bytes]] = {}  # `struct` packers of n int64s by n (bounded: MAX_PACKERS)
MAX_PACKERS = 1024


def _int64(values: list[int]) -> array:
    """The list as an int64 array. Packed by `struct` (one C loop) and copied in: about a quarter less time than
    `array("q", values)` or `fromlist`, which convert each value through an argument parser. Each length's packer
    is made once (a format made at each call: ~20 % more instructions for 128 values)."""
    pack = _PACKERS.get(len(values))
    if pack is None:
        if len(_PACKERS) >= MAX_PACKERS:
            _PACKERS.clear()
        pack = _PACKERS[len(values)] = struct.Struct(f"{len(values)}q").pack
    out = array("q")
    out.frombytes(pack(*values))
    return out


@dataclass(frozen=True, slots=True)
class RunAnchor:
    """Maps monotonic ns to wall-clock time: wall = wall_ns + (mono - mono_ns)."""

    mono_ns: int
    wall_ns: int

    @classmethod
    def now(cls) -> "RunAnchor":
        return cls(mono_ns=time.monotonic_ns(), wall_ns=time.time_ns())

    def wall_s(self, mono_ns: int) -> float:
        return (self.wall_ns + (mono_ns - self.mono_ns)) / 1e9
