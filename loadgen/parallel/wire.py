"""The wire between the parent and its worker processes (`--workers`): one JSON object per line, tagged by
`op`, one frozen dataclass per message, used on both sides.

parent → worker: `Setup` (once), then per cell `CellStart`, `JobGiven`…, `End` (no more jobs) or `Stop`
(no more requests: drop the jobs held), `Cancel` (cancel the requests in flight); `Exit` at the end.
worker → parent: `Ready` (after setup), then per cell `Sent`… and `RecordEnded`… as requests go and end,
`Done` with the worker's client figures. Between cells, `Ping` → `Pong` maps a worker's clock onto the
parent's (`--ray`: the worker runs on another host).

`encode(msg)` gives the line; `decode(line)` the message, or a `WireError` naming what is wrong with it (not
JSON, no or an unknown `op`, missing or unexpected fields, values of the wrong kind).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import orjson

from loadgen.record import CellKey, Record, cell_key


class WireError(ValueError):
    """A line that is not a message of this wire."""


@dataclass(frozen=True)
class Message:
    op: ClassVar[str]

    def to_fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fields(cls, values: dict) -> Message:
        return cls(**values)


@dataclass(frozen=True)
class Setup(Message):
    op: ClassVar[str] = "setup"
    url: str
    api: str
    timeout_s: float
    idle_timeout_s: float  # RunConfig.idle_timeout_s
    headers: dict
    http_client: str
    ca_cert: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class Ready(Message):
    op: ClassVar[str] = "ready"


@dataclass(frozen=True)
class CellStart(Message):
    """A cell begins: the worker runs `slots` slots of it; `deadline_ns` (monotonic) ends a duration cell."""

    op: ClassVar[str] = "cell"
    run_id: str
    cell: CellKey
    attempt: int
    slots: int
    deadline_ns: int | None

    def to_fields(self) -> dict:
        return super().to_fields() | {"cell": self.cell.as_dict()}

    @classmethod
    def from_fields(cls, values: dict) -> Message:
        return cls(**values | {"cell": cell_key(values["cell"])})


@dataclass(frozen=True)
class JobGiven(Message):
    op: ClassVar[str] = "job"
    seq: int
    phase: str
    body: dict


@dataclass(frozen=True)
class End(Message):
    op: ClassVar[str] = "end"


@dataclass(frozen=True)
class Stop(Message):
    op: ClassVar[str] = "stop"


@dataclass(frozen=True)
class Cancel(Message):
    op: ClassVar[str] = "cancel"


@dataclass(frozen=True)
class Exit(Message):
    op: ClassVar[str] = "exit"


@dataclass(frozen=True)
class Sent(Message):
    """Request `seq` went out at `t_ns` (monotonic: CLOCK_MONOTONIC is per host, so it compares)."""

    op: ClassVar[str] = "sent"
    seq: int
    t_ns: int


@dataclass(frozen=True)
class Ping(Message):
    """A clock probe (`--ray`): the parent's monotonic time when it sent it."""

    op: ClassVar[str] = "ping"
    t_ns: int


@dataclass(frozen=True)
class Pong(Message):
    """The answer to a `Ping`: its `t_ns` back and the worker's monotonic time when it answered
    (`loadgen.parallel.ray_clock` maps one clock onto the other)."""

    op: ClassVar[str] = "pong"
    t_ns: int
    t_worker_ns: int


@dataclass(frozen=True)
class RecordEnded(Message):
    op: ClassVar[str] = "rec"
    rec: Record

    def to_fields(self) -> dict:
        return {"rec": self.rec.to_dict()}

    @classmethod
    def from_fields(cls, values: dict) -> Message:
        return cls(Record.from_dict(values["rec"]))


@dataclass(frozen=True)
class Done(Message):
    """The worker's slots of the cell ended: its client figures, and the jobs it got and never sent."""

    op: ClassVar[str] = "done"
    client: dict
    unsent: int


MESSAGES: dict[str, type[Message]] = {m.op: m for m in (Setup, Ready, CellStart, JobGiven, End, Stop, Cancel,
                                                        Exit, Sent, RecordEnded, Done, Ping, Pong)}
_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "str": str, "dict": dict, "float": (int, float)}


def encode(msg: Message) -> bytes:
    return orjson.dumps({"op": msg.op, **msg.to_fields()}) + b"\n"


def decode(line: bytes) -> Message:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"not a JSON line ({exc}): {line[:120]!r}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("op"), str):
        raise WireError(f"not a message (a JSON object with an 'op'): {line[:120]!r}")
    op = obj.pop("op")
    cls = MESSAGES.get(op)
    if cls is None:
        raise WireError(f"unknown op {op!r}; known: {', '.join(MESSAGES)}")
    _check_fields(cls, obj)
    try:
        return cls.from_fields(obj)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise WireError(f"{op}: {type(exc).__name__}: {exc}") from None


def _check_fields(cls: type[Message], obj: dict) -> None:
    """Exactly the message's fields, each of its kind (None where the field allows it)."""
    want = {f.name: str(f.type) for f in fields(cls)}
    missing, extra = sorted(want.keys() - obj.keys()), sorted(obj.keys() - want.keys())
    if missing or extra:
        raise WireError(f"{cls.op}: " + "; ".join(
            part for part in (missing and f"missing {', '.join(missing)}", extra and f"unexpected {', '.join(extra)}")
            if part))
    for name, kind in want.items():
        base, _, optional = kind.partition(" | ")
        types = _TYPES.get(base)
        value = obj[name]
        if types is not None and not (value is None and optional == "None") and (
                not isinstance(value, types) or isinstance(value, bool)):
            raise WireError(f"{cls.op}: {name} should be {kind}, got {type(value).__name__} {value!r:.60}")
