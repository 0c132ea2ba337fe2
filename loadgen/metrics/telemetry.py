"""Folding a cell's telemetry into its results entry: accept length (best source first, the others kept for
cross-checking), power (with energy per token), GPU activity and the bottleneck verdict."""

from __future__ import annotations

from typing import Any

from loadgen.metrics.bottleneck import bottleneck, gpu_bottleneck
from loadgen.metrics.gpu_window import cell_activity
from loadgen.metrics.power import derive_power
from loadgen.metrics.source_result import SourceResult
from loadgen.names import AcceptSource, Bottleneck

DISAGREE_RATIO = 0.10


def _server_sources(results: list[SourceResult], per_source: dict[str, float], unavailable: dict[str, str]) -> None:
    """Add each accept-length source's values to `per_source`, and why a source gave none to `unavailable`."""
    for res in results:
        if res.kind != "accept_length":
            continue
        for src, value in (res.values.get("per_source") or {}).items():
            if value is not None:
                per_source[src] = value
        for src, why in (res.values.get("unavailable") or {}).items():
            unavailable.setdefault(src, why)
        if not res.available and res.reason and not res.values.get("unavailable"):
            unavailable.setdefault(res.name, res.reason)


def no_per_request_reason(drafts: dict | None) -> str:
    """Why there is no per-request accept length: no details at all, or only llama.cpp's draft token counts."""
    if not drafts:
        return "the server returned no per-request speculative details"
    rate = f"{drafts['accept_rate']:.3f}" if drafts.get("accept_rate") is not None else "n/a"
    return (f"the per-request timings give draft tokens ({drafts['accepted']} accepted of {drafts['proposed']} "
            f"proposed, rate {rate}) but no verify step count, which an accept length needs")


def disagreement(per_source: dict[str, float], best: str) -> str | None:
    """"best=x vs s=y, …" for the sources with |value − best| / best > 10 %; None when all agree."""
    ref = per_source[best]
    far = [f"{s}={v:.2f}" for s, v in per_source.items() if ref and abs(v - ref) / ref > DISAGREE_RATIO]
    return f"{best}={ref:.2f} vs " + ", ".join(far) if far else None


def accept_length(client_summary: dict, results: list[SourceResult]) -> dict:
    """{value, source, per_source, unavailable, disagreement}: value from the best available source in
    AcceptSource order (best first: per-request server data, counter deltas, the windowed gauge, log
    lines, client chunks); `disagreement` names any source more than 10 % away from the best one (`disagreement`).
    A cell in which no request succeeded has no value (its per_source figures are kept, as measured)."""
    per_source: dict[str, float] = {}
    unavailable: dict[str, str] = {}
    if client_summary.get("accept_length_per_request") is not None:
        per_source["per_request"] = client_summary["accept_length_per_request"]
    else:
        unavailable["per_request"] = no_per_request_reason(client_summary.get("draft_tokens"))
    _server_sources(results, per_source, unavailable)
    chunks = client_summary.get("accept_length_chunks", client_summary.get("tokens_per_chunk_mean"))
    if chunks is not None and client_summary.get("one_event_per_token"):
        unavailable["chunks"] = (f"not an accept length: the server streams one event per token ({chunks:.2f} "
                                 "tokens per chunk), so chunks do not show its verify steps")
    elif chunks is not None:
        per_source["chunks"] = chunks
    best = next((s for s in AcceptSource if s in per_source), None)
    if not (client_summary.get("requests") or {}).get("ok", 1):
        best = None  # nothing succeeded: the sources' figures stay in per_source, the cell shows none
    out: dict[str, Any] = {"value": per_source.get(best) if best else None, "source": best,
           "per_source": per_source, "unavailable": {k: v for k, v in unavailable.items() if k not in per_source}}
    far = disagreement(per_source, best) if best else None
    if far:
        out["disagreement"] = far
    return out


def power(results: list[SourceResult], output_tokens: int, duration_s: float,
          window_ns: dict | None = None) -> dict | None:
    """The first available power source's values with the per-token figures (`derive_power`, energy cut to
    the cell's `window_ns`); else why the first power source had none; None without a power source."""
    for res in results:
        if res.kind == "power" and res.available:
            return derive_power(dict(res.values), output_tokens, duration_s, window_ns)
    for res in results:
        if res.kind == "power":
            return {"source": res.name, "available": False, "reason": res.reason}
    return None


ACTIVITY_KEYS = ("activity_gpus", "activity_missing")  # a power source's raw activity readings, cut here


def gpu_activity(results: list[SourceResult], window_ns: dict | None) -> dict | None:
    """The first available power source's GPU activity over the cell's window (`gpu_window.cell_activity`);
    None without one, or when it served no activity field at all."""
    for res in results:
        if res.kind == "power" and res.available and res.values.get("activity_gpus") is not None:
            activity = cell_activity(res.name, res.values["activity_gpus"], window_ns,
                                     res.values.get("activity_missing") or {})
            return activity if activity and activity["total"] else None
    return None


def gpu_verdict(summary: dict, activity: dict | None, power_values: dict | None) -> dict:
    """{bottleneck, bottleneck_evidence} for the cell (`bottleneck.bottleneck`, one GPU's power limit as
    evidence); when the client fell behind, also `gpu_bottleneck`: what the GPU figures alone say."""
    limits = [g.get("limit_w") for g in (power_values or {}).get("per_gpu") or [] if g.get("limit_w")]
    in_flight, limit_w = summary.get("achieved_concurrency"), limits[0] if limits else None
    verdict, evidence = bottleneck(summary.get("client"), activity, in_flight, limit_w)
    out = {"bottleneck": str(verdict), "bottleneck_evidence": evidence}
    if verdict is Bottleneck.CLIENT:
        gpu_verdict_, gpu_evidence = gpu_bottleneck(activity, in_flight, limit_w)
        out["gpu_bottleneck"] = f"{gpu_verdict_}: {gpu_evidence}"
    return out
