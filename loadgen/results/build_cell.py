"""The one builder of a cell's result: records + telemetry windows + incidents → `CellResult` (pure).

Figures come from `loadgen.metrics` (the formulas, shared with the tables and the live exporter); the
incidents the builder sees itself are the request counts' (`cell_status.request_incidents`), a telemetry
source lost mid-run and a client that fell behind; the caller passes the ones only it saw (a worker that
died, the server going away, an interrupt).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.config import SloConfig, VerifyConfig
from loadgen.metrics import accept_positions
from loadgen.metrics import telemetry as cell_telemetry
from loadgen.metrics.cell import summarize
from loadgen.metrics.cell_noise import bootstrap_method, cell_intervals
from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.client_health import saturation_note
from loadgen.metrics.counts import scheduled
from loadgen.metrics.shared_prefix import shared_prefix_figures
from loadgen.metrics.slo import slo_figures
from loadgen.metrics.source_result import SourceResult
from loadgen.metrics.steady import Arrivals, token_arrivals
from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.cell_status import DEFAULT_MAX_FAILED_FRACTION, failed_fraction, request_incidents
from loadgen.results.correctness import correctness_incidents, correctness_part
from loadgen.results.incidents import Incident, IncidentKind
from loadgen.results.slo_part import Slo, first_wave_note

TELEMETRY_LOST = "TELEMETRY LOST"  # how a requested source that went quiet mid-run opens its warning


def figures(key: CellKey, records: Sequence[Record], sources: Sequence[SourceResult], client: dict | None,
            chunks: ChunkFold | None = None, arrivals: Arrivals = token_arrivals) -> dict:
    """The cell's figures as flat JSON: the client-side summary (its per-chunk figures from `chunks` when the
    cell folded them as it ran: `metrics.cell.summarize`), accept length, power, GPU activity and the
    bottleneck verdict, each source's values."""
    summary = summarize(records, chunks, arrivals) | {"client": client}
    flat = key.as_dict() | summary
    flat["accept_length"] = cell_telemetry.accept_length(summary, list(sources))
    flat["power"] = cell_telemetry.power(list(sources), summary["output_tokens"], summary["duration_s"],
                                         summary.get("window_ns"))
    flat["accept_by_position"] = accept_positions.from_sources(list(sources)) or \
        accept_positions.from_histograms([r for r in records if r.ok])
    flat["gpu_activity"] = cell_telemetry.gpu_activity(list(sources), summary.get("window_ns"))
    flat |= cell_telemetry.gpu_verdict(summary, flat["gpu_activity"], flat["power"])
    flat["telemetry"] = {r.name: {"available": r.available, "reason": r.reason,
                                  **{k: v for k, v in r.values.items() if k not in cell_telemetry.ACTIVITY_KEYS}}
                         for r in sources}
    flat["intervals"] = cell_intervals(records, summary["duration_s"], flat["accept_length"].get("source"))
    flat["interval_method"] = bootstrap_method(summary["requests"]["ok"])
    return flat


def build_cell(key: CellKey, records: Sequence[Record], sources: Sequence[SourceResult] = (),
               client: dict | None = None, incidents: Sequence[Incident] = (),
               max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION, verified: Sequence[Record] = (),
               verify: VerifyConfig | None = None, reference: str = "", slo: SloConfig | None = None,
               not_sent: int = 0, shared_prefix: tuple[int, int] | None = None, chunks: ChunkFold | None = None,
               arrivals: Arrivals = token_arrivals) -> CellResult:
    """The cell's result from its measured records, its telemetry sources' results over the window, the
    client's health and the incidents the caller saw; judged by `max_failed_fraction`. With `verify` (on),
    its verification records (`verified`) against the reference named `reference` fill `correctness`; with
    latency targets (`slo`) its attainment and goodput, counting the `not_sent` measured requests as not good;
    with `shared_prefix` (groups, tokens), the prefix cache's share of it (`metrics.shared_prefix`).
    `chunks`: the fold of the records' chunks, when the cell made one as it ran (their lists then read back
    through `arrivals`)."""
    flat = figures(key, records, sources, client, chunks, arrivals) | {"max_failed_fraction": max_failed_fraction}
    if shared_prefix:
        flat["shared_prefix"] = shared_prefix_figures([r for r in records if r.ok], *shared_prefix)
    flat["failed_fraction"] = failed_fraction(flat)
    result = from_json(flat | {"incidents": []})
    if slo is not None and slo.enabled:
        slots = key.concurrency if key.request_rate is None else 0  # a closed loop's first wave: one per slot
        result.slo = Slo(**slo_figures(records, slo.slo_targets, slo.slo_attainment, flat["duration_s"], not_sent,
                                       slots))
    warnings = [w for r in sources for w in r.warnings]
    for w in warnings:
        if w.startswith(TELEMETRY_LOST):
            result.add(IncidentKind.TELEMETRY_LOST, w)
    result.warnings = [w for w in warnings if not w.startswith(TELEMETRY_LOST)]
    if result.workload.cancellation:
        result.warnings.append(abandoned_note(flat["requests"]))
    if result.slo is not None and first_wave_note(result.slo):
        result.warnings.append(first_wave_note(result.slo))
    for found in (*request_incidents(flat), *incidents):
        result.add(found.kind, found.reason)
    if client and client.get("saturated"):
        result.add(IncidentKind.CLIENT_SATURATED, saturation_note(client, key.as_dict()))
    if verify is not None and verify.enabled:
        result.correctness = correctness_part(verified, verify, reference, flat.get("output_tokens") or 0)
        for found in correctness_incidents(result.correctness):
            result.add(found.kind, found.reason)
    return result


def abandoned_note(requests: dict) -> str:
    """'20 of 80 abandoned on purpose (--cancel-fraction)': a note, never a failure."""
    return f"{requests['abandoned']} of {scheduled(requests)} abandoned on purpose (--cancel-fraction)"


def unmeasured(key: CellKey, kind: IncidentKind, reason: str, run_id: str | None = None) -> CellResult:
    """The result of a cell that was never measured (not reached, failed before load, no slot)."""
    return CellResult(key, run_id, incidents=[Incident(kind, reason)])
