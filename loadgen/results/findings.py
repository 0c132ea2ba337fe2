"""What a part of the run learned about a cell, handed back to the builder (`build_cell.build_cell`,
`build_cell.amended`) instead of written into a built result.

A driver returns its figures of the load (`Driver.finish`), a shard or the worker processes add theirs, the
server-down policy returns the attempt's accounting and incidents, the runner its run id and wall clock, a
check its judgement, the drift check its verdict. Each is a `CellFindings`; they add up with `+` (later
findings after earlier ones), and only the builder turns them into a new `CellResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadgen.results.incidents import Incident, IncidentKind


@dataclass(frozen=True)
class CellFindings:
    """Facts about a cell from outside the builder. `load` and `requests` name fields of the `Load` and
    `Requests` parts (an unknown name fails when the builder applies it); `workers` are the worker processes'
    own client health, merged into the cell's `client` (`metrics.client_health.merge_client`)."""

    load: Mapping[str, Any] = field(default_factory=dict)
    requests: Mapping[str, Any] = field(default_factory=dict)
    workers: tuple[dict, ...] | None = None
    incidents: tuple[Incident, ...] = ()
    warnings: tuple[str, ...] = ()
    run_id: str | None = None

    def __add__(self, later: CellFindings) -> CellFindings:
        workers = self.workers if later.workers is None else (*(self.workers or ()), *later.workers)
        return CellFindings(load={**self.load, **later.load}, requests={**self.requests, **later.requests},
                            workers=workers, incidents=(*self.incidents, *later.incidents),
                            warnings=(*self.warnings, *later.warnings), run_id=later.run_id or self.run_id)

    @property
    def empty(self) -> bool:
        return self == NOTHING


NOTHING = CellFindings()


def incident(kind: IncidentKind, reason: str) -> CellFindings:
    """One incident, nothing else."""
    return CellFindings(incidents=(Incident(kind, reason),))
