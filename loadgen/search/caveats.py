"""What a search's answer rests on that a reader must know (pure): its bracket's end whose two measurements
disagreed (the second counts), or whose cells' client fell behind (its latencies are partly the client's).

The bracket's two ends are the answer: the met end is the answer itself, the missed end says the next load
missed. An end is read from the latest measurement of its load (`walk.Bracket.latest`, every part of
it pooled), so its caveats are:
- `disagreed`: the load was measured more than once and its latest measurement disagreed with the one before
  it (`probes.disagree`: one met and the other missed, or throughput × 2 apart). The answer moved with a
  re-measurement: had the first counted, the bracket would be another;
- `client_saturated`: a part of the end's latest measurement is a cell whose client fell behind
  (`cell_status.client_saturated`): its attainment counts latencies the client added, so a missed end may be
  the client's miss and the answer too low.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from loadgen.results.cell_status import client_saturated
from loadgen.search.probes import SearchConfig
from loadgen.search.walk import Bracket


class CaveatKind(StrEnum):
    DISAGREED = "disagreed"
    CLIENT_SATURATED = "client_saturated"


class End(StrEnum):
    MET = "met"
    MISSED = "missed"


@dataclass(frozen=True)
class Caveat:
    """One thing the answer rests on: which end (met, missed), its load, what, and the sentence a person reads."""

    end: End
    load: float
    kind: CaveatKind
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"end": self.end, "load": self.load, "kind": self.kind, "reason": self.reason}


def caveats(b: Bracket, cfg: SearchConfig) -> list[Caveat]:
    """The caveats of the bracket's ends, met end first (module docstring); none when there is no answer."""
    found: list[Caveat] = []
    for end, x in ((End.MET, b.met), (End.MISSED, b.missed)):
        if x is None or x not in b.latest:
            continue
        name = cfg.name(x)
        again = next((a for a in reversed(b.again) if a.load == x and a.second is b.latest[x]), None)
        if again is not None and again.disagreed:
            found.append(Caveat(end, x, CaveatKind.DISAGREED, (
                f"the {end} end {name} rests on a re-measurement that disagreed with the one before it "
                f"({again.first.attainment:.0%} good, {again.first.tok_s:.1f} tok/s → {again.second.attainment:.0%} "
                f"good, {again.second.tok_s:.1f} tok/s): the second counts")))
        parts = b.latest[x].parts
        saturated = [why for c in parts if (why := client_saturated(c)) is not None]
        if saturated:
            cells = "its cell" if len(parts) == 1 else f"{len(saturated)} of its {len(parts)} cells"
            found.append(Caveat(end, x, CaveatKind.CLIENT_SATURATED, (
                f"the {end} end {name} rests on {cells} whose client fell behind (CLIENT SATURATED: its latencies "
                f"are partly the client's): {saturated[0].removeprefix('client saturated: ')}")))
    return found
