"""`loadgen merge OUT.json SHARD.json …`: shard results (`--shard i/N`, one file each) into one results file.

Every cell is summarised again from the merged raw records with `loadgen.metrics.cell.summarize`, so merged
percentiles are exact (never averages of the shards' percentiles) and totals are the sums. Records keep
their values; their times are moved onto the first input's monotonic clock: inputs from the same boot of
one host (same `host.boot_id`) share CLOCK_MONOTONIC and are not moved; others are placed through each run's
wall-clock anchor (their error is the hosts' clock offset, ms with NTP; intervals within a record, such as
TTFT, are unaffected). The merged records go to OUT's `.requests.jsonl`, in end order.

Server-side telemetry (accept-length counters, power, GPU activity) was sampled by every shard against the same
server; the merged cell takes the first shard's, with the per-token figures recomputed from the merged tokens
and the bottleneck judged again over the merged requests (their in-flight count, the shards' clients).
Each merged cell lists its shards' windows and warns when they overlap less than 90 % (shards that did not
run a cell at the same time did not load the server together).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from loadgen.errors import UsageError
from loadgen.files import input_error, read_input, read_jsonl
from loadgen.metrics import telemetry as cell_telemetry
from loadgen.metrics.cell import summarize
from loadgen.metrics.client_health import combine
from loadgen.metrics.power import derive_power
from loadgen.metrics.slo import slo_figures
from loadgen.metrics.source_result import SourceResult
from loadgen.names import Phase
from loadgen.record import CellKey, Record, RunAnchor, cell_key
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.cell_status import max_failed_fraction, requests_failed_fraction, requests_incidents
from loadgen.results.document import requests_path
from loadgen.results.figures import ClientHealth
from loadgen.results.provenance import wall_clock
from loadgen.results.schema import RESULTS_SCHEMA as SCHEMA
from loadgen.results.slo_part import Slo
from loadgen.results.stored import stored_cells

TIME_FIELDS = ("t_intended_ns", "t_sent_ns", "t_first_byte_ns", "t_first_token_ns", "t_last_token_ns",
               "t_end_ns")
MIN_OVERLAP = 0.9
CLIENT_SOURCES = ("per_request", "chunks")  # accept-length sources computed from records, so recomputed here


def clock_offset_ns(doc: dict, ref: dict) -> int:
    """What to add to `doc`'s monotonic times to put them on `ref`'s clock (0 on the same boot)."""
    boot, ref_boot = (doc.get("host") or {}).get("boot_id"), (ref.get("host") or {}).get("boot_id")
    if boot and boot == ref_boot:
        return 0
    a, r = doc["anchor"], ref["anchor"]
    return (a["wall_ns"] - a["mono_ns"]) - (r["wall_ns"] - r["mono_ns"])


def shift(rec: dict, offset_ns: int) -> dict:
    if offset_ns:
        rec = dict(rec)
        for f in TIME_FIELDS:
            if rec.get(f):
                rec[f] += offset_ns
    return rec


def window_ns(recs: list[Record]) -> tuple[int, int] | None:
    sent = [r.t_sent_ns for r in recs if r.t_sent_ns]
    return (min(sent), max(r.t_end_ns for r in recs)) if sent else None


def overlap(windows: list[tuple[int, int]]) -> float | None:
    """Share of the windows' union that all of them cover: (min end − max start) / (max end − min start)."""
    if len(windows) < 2:
        return None
    span = max(e for _, e in windows) - min(s for s, _ in windows)
    common = min(e for _, e in windows) - max(s for s, _ in windows)
    return max(0.0, common / span) if span > 0 else 1.0


def merge_client(blocks: Sequence[ClientHealth | None]) -> dict | None:
    """The shards' client blocks combined (`client_health.combine`: each shard is its own process), with
    every shard's block under `per_shard`; None when no shard has one."""
    present = [b for b in blocks if b]
    if not present:
        return None
    return combine([(f"shard {i}", b) for i, b in enumerate(present)]) | {"per_shard": present}


def _server_accept(first: CellResult) -> SourceResult:
    """The first shard's server-side accept-length sources (the client's are recomputed from the records)."""
    acc = first.accept.accept_length or {}
    others = {k: v for k, v in (acc.get("per_source") or {}).items() if k not in CLIENT_SOURCES}
    unavailable = {k: v for k, v in (acc.get("unavailable") or {}).items() if k not in CLIENT_SOURCES}
    return SourceResult("shard-0", "accept_length", bool(others), {"per_source": others, "unavailable": unavailable})


def merge_cell(key: CellKey, entries: Sequence[CellResult | None], records: list[list[Record]]) -> CellResult:
    """One merged cell from each shard's cell (`entries`: None where a shard lacks it) and measured records."""
    # in end order, as one process appends them, so even float sums come out the same
    measured = sorted((r for recs in records for r in recs), key=lambda r: r.t_end_ns)
    summary = summarize(measured)
    first = next(e for e in entries if e is not None)
    summary["client"] = merge_client([e.telemetry.client for e in entries if e is not None])
    entry = key.as_dict() | summary
    entry["accept_length"] = cell_telemetry.accept_length(summary, [_server_accept(first)])
    entry["power"] = _power(first.telemetry.power, summary)
    entry["gpu_activity"] = first.gpu.gpu_activity  # the same GPUs, over the first shard's window
    entry |= cell_telemetry.gpu_verdict(summary, entry["gpu_activity"], entry["power"])
    entry["telemetry"] = first.telemetry.telemetry
    entry["warnings"] = [f"shard {i}: {w}" for i, e in enumerate(entries) if e for w in e.notes]
    not_sent = [e.requests.requests_not_sent for e in entries if e is not None]
    if not_sent and all(isinstance(n, int) for n in not_sent):
        entry["requests_not_sent"] = sum(not_sent)
    windows = [w for w in (window_ns(recs) for recs in records) if w]
    ov = overlap(windows)
    entry["shards"] = {"count": len(entries), "ran": sum(e is not None for e in entries),
                       "requests": [len(recs) for recs in records], "window_overlap": ov}
    if ov is not None and ov < MIN_OVERLAP:
        entry["warnings"].append(f"shards ran this cell {ov:.0%} together (< {MIN_OVERLAP:.0%}): they did "
                                 "not load "
                                 "the server at the same time; start them with --start-at/--cell-period")
    entry["max_failed_fraction"] = max_failed_fraction(first)  # the shards' limit, over the merged requests
    entry["failed_fraction"] = requests_failed_fraction(entry["requests"])
    result = from_json(entry | {"incidents": []})
    for incident in requests_incidents(entry["requests"], entry["max_failed_fraction"]):
        result.add(incident.kind, incident.reason)
    result.slo = _merged_slo(first.slo, measured, summary["duration_s"], result.requests.requests_not_sent)
    return result


def _merged_slo(slo: Slo | None, measured: list[Record], window_s: float, not_sent: int | None) -> Slo | None:
    """The shards' targets over the merged requests (every shard's never-sent ones not good)."""
    if slo is None:
        return None
    assert slo.attainment_required is not None  # a shard's part is built with its --slo-attainment
    return Slo(**slo_figures(measured, slo.targets_s, slo.attainment_required, window_s, not_sent or 0))


def _power(block: Mapping[str, Any] | None, summary: dict) -> Mapping[str, Any] | None:
    if not block or not block.get("available", True) or "cell_energy_j" not in block:
        return block
    derived = ("cell_energy_j", "j_per_output_token", "output_tokens_per_j")
    base = {k: v for k, v in block.items() if k not in derived}
    return derive_power(base, summary["output_tokens"], summary["duration_s"])


def load(path: str) -> tuple[dict, list[dict]]:
    try:
        doc = orjson.loads(read_input(path, "give the shards' results files (loadgen --out)"))
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: cannot read results ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UsageError(f"{path}: not a loadgen results file (schema "
                         f"{doc.get('schema') if isinstance(doc, dict) else None!r})")
    rpath = requests_path(path)
    if not os.path.exists(rpath):
        raise UsageError(f"{path}: its records {rpath} are missing; merge recomputes the figures from them")
    try:
        return doc, read_jsonl(rpath)
    except OSError as exc:
        raise input_error(rpath, exc, "merge recomputes the figures from a shard's records") from None


def _of_the_matrix(row: dict, doc: dict) -> bool:
    """Whether a record is of the shard's matrix cells, not of a cell measured again under its own run id (the
    drift check's control `<run>-control`, which shares the first cell's key: docs/drift.md)."""
    return not doc.get("run_id") or row.get("run_id", doc["run_id"]) == doc["run_id"]


def _measured_records(doc: dict, recs: list[dict], cells: list[CellResult], ref: dict,
                      merged_rows: list[dict]) -> dict[CellKey, list[Record]]:
    """A shard's measured records by cell (of each cell's last attempt, of the matrix), on `ref`'s clock; every
    record row, shifted, is appended to `merged_rows`."""
    offset = clock_offset_ns(doc, ref)
    attempt = {c.key: c.load.attempt or 0 for c in cells}
    by_cell: dict[CellKey, list[Record]] = {}
    for row in recs:
        row = shift(row, offset)
        merged_rows.append(row)
        key = cell_key(row["cell"])
        if (row.get("phase") == Phase.MEASURE and row.get("attempt", 0) == attempt.get(key, 0)
                and _of_the_matrix(row, doc)):
            by_cell.setdefault(key, []).append(Record.from_dict(row))
    return by_cell


def merge(docs: list[dict], rows: list[list[dict]]) -> tuple[dict, list[dict]]:
    """(merged results document, merged record rows)."""
    ref = docs[0]
    typed = [stored_cells(doc) for doc in docs]
    keys = list(dict.fromkeys(c.key for shard in typed for c in shard))
    merged_rows: list[dict] = []
    cells = []
    per_doc = [_measured_records(doc, recs, shard, ref, merged_rows) for doc, recs, shard in zip(docs, rows, typed)]
    for key in keys:
        entries = [next((c for c in shard if c.key == key), None) for shard in typed]
        merged = merge_cell(key, entries, [d.get(key, []) for d in per_doc])
        if ref.get("anchor"):  # records are on the first shard's clock now: its anchor dates them
            merged.load.wall_clock = wall_clock(merged.load.window_ns, RunAnchor(**ref["anchor"]))
        cells.append(merged.to_json())
    out = dict(ref)
    out["cells"] = cells
    out["merged_from"] = [{"run_id": d.get("run_id"), "label": d.get("label"), "shard": d.get("shard"),
                           "host": d.get("host"), "clock_offset_ns": clock_offset_ns(d, ref)} for d in docs]
    out.pop("shard", None)
    # each shard judged its own server time line: its drift part stays with it, none stands for the merged run
    out.pop("drift", None)
    for entry, d in zip(out["merged_from"], docs):
        if d.get("drift"):
            entry["drift"] = d["drift"]
    merged_rows.sort(key=lambda r: r.get("t_end_ns") or 0)
    return out, merged_rows


def check_shards(docs: list[dict], paths: list[str]) -> list[str]:
    """Warnings about inputs that do not look like the shards of one run."""
    notes = []
    shards: list[Any] = [d.get("shard") for d in docs]  # each a shard's {index, count}, or None
    if all(shards):
        counts = {s["count"] for s in shards}
        indices = sorted(s["index"] for s in shards)
        if len(counts) != 1 or indices != list(range(next(iter(counts)))):
            notes.append(f"shards {indices} of {sorted(counts)}: not one complete set of i/N")
    keys = ("api", "contexts", "concurrency", "max_tokens", "requests_per_cell", "duration_per_cell_s", "url")
    for d, p in zip(docs[1:], paths[1:]):
        diff = [k for k in keys if (d.get("args") or {}).get(k) != (docs[0].get("args") or {}).get(k)]
        if diff:
            notes.append(f"{p}: arguments differ from {paths[0]}: {', '.join(diff)}")
    for d, p in zip(docs, paths):
        if (d.get("drift") or {}).get("drifted"):
            notes.append(f"{p}: DRIFT: {d['drift'].get('sentence') or 'the server drifted during this shard'}")
    return notes
