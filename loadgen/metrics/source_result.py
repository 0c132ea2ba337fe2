"""What one telemetry source measured over one cell window: the value the telemetry adapters return and the
metrics fold (`metrics/telemetry.py`). It lives here, below `loadgen/telemetry/`, so the metrics never import
the adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceResult:
    """What one source measured over one cell window.

    `kind` names the quantity family ("accept_length", "power", "server"). `values` holds the source's
    figures (documented by each adapter); `warnings` are one-line notes shown to the user, and `losses` those of
    them that say part of the cell's data is missing (a node that stopped answering, failed scrapes or reads); `lost` is the note of
    a source the run asked for that went quiet (`cli/telemetry_checks.Required`), its cell's telemetry_lost
    incident.
    """

    name: str
    kind: str
    available: bool
    values: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    lost: str | None = None
