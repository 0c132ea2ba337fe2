"""The incidents of a cell whose file did not store them as this loadgen does: a file of an earlier loadgen (no
`incidents`: they are implied by its status, error and figures), or a cell whose status was set by hand or by
another tool (`stored_verdict`). Reading them here, where a cell's JSON is read into its type, is the one place
a stored text stands for a kind.
"""

from __future__ import annotations

from loadgen.metrics.client_health import saturation_note
from loadgen.names import CellStatus
from loadgen.results.incidents import Incident, IncidentKind


def legacy_incidents(data: dict) -> list[Incident]:
    """The incidents behind a cell written before they were stored: its failure or skip as it was recorded,
    an early stop (requests not sent while the cell was ok) and a saturated client."""
    found = stored_verdict(data)
    if not found and data.get("requests_not_sent"):
        stored = [w for w in data.get("warnings") or [] if w.startswith("stopped early")]
        found.append(Incident(IncidentKind.INTERRUPTED, stored[0] if stored else
                              f"stopped early: {data['requests_not_sent']} measured requests not sent"))
    client = data.get("client") or {}
    if client.get("saturated"):
        found.append(Incident(IncidentKind.CLIENT_SATURATED, saturation_note(client, data)))
    return found


def stored_verdict(data: dict) -> list[Incident]:
    """The incident a stored status of skipped or failed stands for (none for ok)."""
    status = data.get("status", CellStatus.OK)
    if status == CellStatus.SKIPPED:
        kind = IncidentKind.NO_SLOT if data.get("shard_has_no_slot") else IncidentKind.NOT_REACHED
        return [Incident(kind, data.get("error") or "not measured")]
    if status != CellStatus.OK:
        return [Incident(IncidentKind.RECORDED, data.get("error") or str(status))]
    return []
