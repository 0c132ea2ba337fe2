"""The `slo` part of a cell's result: its latency targets, attainment and goodput (`--slo`).

Filled by `build_cell` from `metrics.slo.slo_figures`; written as the cell's `slo` object and read back into
this type. Each formula is in `loadgen/metrics/slo.py` and docs/definitions.md#slo.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.results.fields_doc import KeyedPart, doc


@dataclass
class Slo(KeyedPart):
    """Latency targets and goodput (`--slo`, `--slo-attainment`; definitions.md#slo)."""

    targets_s: dict = doc("the targets: metric (ttft, tpot, itl, e2e, ttft_from_intended) → the most a "
                          "request's value may be", "s", {})
    attainment_required: float | None = doc("--slo-attainment: the share of requests that must be good", "fraction")
    scheduled: int | None = doc("the denominator: measured requests, failed, cancelled and never sent included",
                                "requests")
    good: int | None = doc("requests that succeeded and met every target", "requests")
    attainment: float | None = doc("good / scheduled", "fraction")
    per_target: dict = doc("metric → (requests that succeeded and met that target) / scheduled", "fraction", {})
    goodput_requests_s: float | None = doc("good / duration_s (the cell's measured window)", "requests/s")
    good_output_tok_s: float | None = doc("Σ completion_tokens of good requests / duration_s", "tokens/s")
    met: bool | None = doc("attainment ≥ attainment_required: the cell meets the SLO")
    misses: int | None = doc("scheduled − good: requests that were not good", "requests")
    first_wave: int | None = doc("a closed-loop cell's first wave: its first C requests by send time (each "
                                 "slot's first; C = concurrency; 0 in an open loop)", "requests")
    first_wave_misses: int | None = doc("the misses among the first wave (where the misses were; the attainment "
                                        "counts them like any other)", "requests")


def first_wave_note(slo: Slo) -> str | None:
    """'SLO: 63 of 63 misses in the first wave (its first 64 requests, one per slot; …)' when a closed-loop
    cell missed targets; None without misses or a wave."""
    if not slo.misses or not slo.first_wave:
        return None
    hint = "; --slot-ramp S spreads the slots' starts" if 2 * (slo.first_wave_misses or 0) >= slo.misses else ""
    return (f"SLO: {slo.first_wave_misses} of {slo.misses} misses in the first wave (its first {slo.first_wave} "
            f"requests, one per slot{hint})")


def attainment_text(slo: Slo | dict | None) -> str | None:
    """'93% met' or '41% MISS' (the cell's attainment, and whether it met the SLO); None without figures (a
    part's JSON object is read into its type first)."""
    part = Slo.from_json(slo) if isinstance(slo, dict) else slo
    if part is None or part.attainment is None:
        return None
    return f"{part.attainment:.0%} {'met' if part.met else 'MISS'}"
