"""The one builder of a cell's result: records + telemetry windows + incidents → `CellResult` (pure), and the
one way a built result changes afterwards (`amended`: a new result with later `CellFindings`).

Figures come from `loadgen.metrics` (the formulas, shared with the tables and the live exporter); the
incidents the builder sees itself are the request counts' (`cell_status.requests_incidents`), a telemetry
source lost mid-run and a client that fell behind; the caller passes the ones only it saw (a worker that
died, the server going away, an interrupt). Its typed parts are built from the figures directly; `from_json`
is for reading files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from loadgen.config import SloConfig
from loadgen.metrics import accept_positions
from loadgen.metrics import telemetry as cell_telemetry
from loadgen.metrics.cell import summarize
from loadgen.metrics.cell_noise import bootstrap_method, cell_intervals
from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.client_health import merge_client, saturation_note
from loadgen.metrics.counts import scheduled
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.shared_prefix import shared_prefix_figures
from loadgen.metrics.slo import slo_figures
from loadgen.metrics.source_result import SourceResult
from loadgen.metrics.steady import Arrivals, token_arrivals
from loadgen.record import CellKey, Record, cell_key
from loadgen.results.cell_result import CellResult, typed_parts
from loadgen.results.cell_status import DEFAULT_MAX_FAILED_FRACTION, requests_failed_fraction, requests_incidents
from loadgen.results.correctness import Verification, correctness_incidents, correctness_part
from loadgen.results.figures import ClientHealth
from loadgen.results.findings import NOTHING, CellFindings
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.results.slo_part import Slo, first_wave_note


def figures(key: CellKey, records: Sequence[Record] | RecordTable, sources: Sequence[SourceResult], client: dict | None,
            chunks: ChunkFold | None = None, arrivals: Arrivals = token_arrivals) -> dict:
    """The cell's figures as flat JSON: the client-side summary (its per-chunk figures from `chunks` when the
    cell folded them as it ran: `metrics.cell.summarize`), accept length, power, GPU activity and the
    bottleneck verdict, each source's values."""
    table = RecordTable.of(records)
    summary = summarize(table, chunks, arrivals) | {"client": client}
    flat = key.as_dict() | summary
    flat["accept_length"] = cell_telemetry.accept_length(summary, list(sources))
    flat["power"] = cell_telemetry.power(list(sources), summary["output_tokens"], summary["duration_s"],
                                         summary.get("window_ns"))
    flat["accept_by_position"] = accept_positions.from_sources(list(sources)) or \
        accept_positions.from_histograms(table.ok())
    flat["gpu_activity"] = cell_telemetry.gpu_activity(list(sources), summary.get("window_ns"))
    flat |= cell_telemetry.gpu_verdict(summary, flat["gpu_activity"], flat["power"])
    flat["telemetry"] = {r.name: {"available": r.available, "reason": r.reason,
                                  **{k: v for k, v in r.values.items() if k not in cell_telemetry.ACTIVITY_KEYS}}
                         for r in sources}
    flat["intervals"] = cell_intervals(table, summary["duration_s"], flat["accept_length"].get("source"))
    flat["interval_method"] = bootstrap_method(summary["requests"]["ok"])
    return flat


def build_cell(key: CellKey, records: Sequence[Record] | RecordTable, sources: Sequence[SourceResult] = (),
               client: dict | None = None, incidents: Sequence[Incident] = (),
               max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION, verification: Verification | None = None,
               slo: SloConfig | None = None, not_sent: int = 0, shared_prefix: tuple[int, int] | None = None,
               chunks: ChunkFold | None = None, arrivals: Arrivals = token_arrivals,
               found: CellFindings = NOTHING) -> CellResult:
    """The cell's result from its measured records, its telemetry sources' results over the window, the
    client's health and the incidents the caller saw; judged by `max_failed_fraction`. With `verification`
    (--verify: the cell's verification records, `verify/verifier.py`), `correctness`; with latency targets (`slo`)
    its attainment and goodput, counting the `not_sent` measured requests as not good; with `shared_prefix`
    (groups, tokens), the prefix cache's share of it (`metrics.shared_prefix`). `chunks`: the fold of the
    records' chunks, when the cell made one as it ran (their lists then read back through `arrivals`).
    `found`: what the driver learned of the load (its figures, a shard's or the workers' own), applied last.
    `records`: a list of them, or the columns a long cell kept (`metrics.record_table.RecordTable`)."""
    records = RecordTable.of(records)
    flat = figures(key, records, sources, client, chunks, arrivals) | {"max_failed_fraction": max_failed_fraction}
    if shared_prefix:
        flat["shared_prefix"] = shared_prefix_figures(records.ok(), *shared_prefix)
    flat["failed_fraction"] = requests_failed_fraction(flat["requests"])
    parts, extra = typed_parts(flat)
    slo_part = _slo(key, records, slo, flat["duration_s"], not_sent)
    correctness = correctness_part(verification, flat.get("output_tokens") or 0) if verification else None
    notes = [w for r in sources for w in r.warnings]
    if parts["workload"].cancellation:
        notes.append(abandoned_note(flat["requests"]))
    if slo_part is not None and (wave := first_wave_note(slo_part)):
        notes.append(wave)
    seen = [*(Incident(IncidentKind.TELEMETRY_LOST, r.lost) for r in sources if r.lost),
            *requests_incidents(flat["requests"], max_failed_fraction), *incidents]
    if client and client.get("saturated"):
        seen.append(Incident(IncidentKind.CLIENT_SATURATED, saturation_note(client, key.as_dict())))
    if correctness is not None:
        seen += correctness_incidents(correctness)
    result = CellResult(cell_key(key.as_dict()), None, **parts, slo=slo_part, correctness=correctness,
                        incidents=_unique(seen), warnings=notes, extra=extra)
    return amended(result, found)


def _slo(key: CellKey, records: RecordTable, slo: SloConfig | None, duration_s: float,
         not_sent: int) -> Slo | None:
    if slo is None or not slo.enabled:
        return None
    slots = key.concurrency if key.request_rate is None else 0  # a closed loop's first wave: one per slot
    return Slo(**slo_figures(records, slo.slo_targets, slo.slo_attainment, duration_s, not_sent, slots))


def amended(result: CellResult, found: CellFindings) -> CellResult:
    """A new result: `result` with what was learned of the cell after it was built (`CellFindings`: the
    driver's figures, the server-down policy's accounting, the run id, a check's or the drift check's
    incidents). The one way a built result changes; `result` itself is left as it was."""
    if found.empty:
        return result
    client = result.telemetry.client
    incidents = [*result.incidents, *found.incidents]
    if found.workers is not None and client is not None:
        client = cast(ClientHealth, merge_client(client, list(found.workers)))  # the same block, merged
        if client.get("saturated"):  # judged again on every process's health: a worker may be what fell behind
            incidents = [i for i in incidents if i.kind != IncidentKind.CLIENT_SATURATED]
            incidents.append(Incident(IncidentKind.CLIENT_SATURATED, saturation_note(client, result.key.as_dict())))
    return replace(result, run_id=found.run_id or result.run_id, requests=replace(result.requests, **found.requests),
                   load=replace(result.load, **found.load), telemetry=replace(result.telemetry, client=client),
                   incidents=_unique(incidents),
                   warnings=[*result.warnings, *found.warnings])


def _unique(incidents: Sequence[Incident]) -> list[Incident]:
    """Each incident once, in the order first seen (the same kind and reason again changes nothing)."""
    return list(dict.fromkeys(incidents))


def abandoned_note(requests: dict) -> str:
    """'20 of 80 abandoned on purpose (--cancel-fraction)': a note, never a failure."""
    return f"{requests['abandoned']} of {scheduled(requests)} abandoned on purpose (--cancel-fraction)"


def unmeasured(key: CellKey, kind: IncidentKind, reason: str, run_id: str | None = None) -> CellResult:
    """The result of a cell that was never measured (not reached, failed before load, no slot)."""
    return CellResult(key, run_id, incidents=[Incident(kind, reason)])
