"""Where a tune stands, for the live exporter: the configuration being measured, each wanted load's leader and
whether its answer is decided, and what the tune has spent. Made from `tune.json`'s document (`result.py`), so
the gauges say what the file says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class LoadStanding:
    """One wanted load: its leader now (the verdict's first), the leader's figure, and the state of its answer:
    `open` (a tie the end will measure again), or the verdict's decision (`wins`, `tied`, `alone`, `none`)."""

    context: int
    over: str  # concurrency | rate
    load: float
    leader: str | None
    value: float | None
    answer: str


@dataclass(frozen=True)
class TuneState:
    name: str
    config: str | None  # the configuration measured now (None between visits)
    phase: str | None  # first, end 1, …
    loads: tuple[LoadStanding, ...]
    cells: int
    requests: int
    restarts: int
    infeasible: tuple[str, ...]
    configs: tuple[str, ...] = ()  # every configuration of the file


ANSWER_STATES = ("open", "wins", "tied", "alone", "none")


class TuneWatcher(Protocol):
    def tune_state(self, state: TuneState) -> None:
        """The tune's state changed (a visit started, a part was measured)."""


def standing(answer: dict[str, Any]) -> LoadStanding:
    """A `tune.json` answer's load, leader and state."""
    rate = answer.get("rate")
    first = (answer.get("estimates") or [None])[0]
    return LoadStanding(answer["context"], "rate" if rate is not None else "concurrency",
                        float(rate if rate is not None else answer["concurrency"]),
                        first["config"] if first else None, first["value"] if first else None,
                        "open" if answer.get("contenders") else answer["decision"])


def tune_state(doc: dict[str, Any], config: str | None, phase: str | None) -> TuneState:
    return TuneState(doc["name"], config, phase, tuple(standing(a) for a in doc["answers"]), doc["cells_measured"],
                     doc["requests_measured"], doc["restarts"], tuple(i["name"] for i in doc["infeasible"]),
                     tuple(c["name"] for c in doc.get("configs") or []))
