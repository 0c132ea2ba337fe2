"""A speculative cell's throughput taken apart (definitions.md#verify-steps): what the verdict across
configurations says *why* one configuration out-serves another.

- `verify_steps_per_s` = output tok/s / accept length. With the accept length from the server's per-request
  counts (Σ completion_tokens / Σ spec_verify_ct) this is Σ spec_verify_ct / window: the verify steps of every
  request, added up, per second of the cell. So output tok/s = accept length × verify steps/s exactly, and the
  ratio of two configurations' output tok/s is the product of their accept-length ratio and their
  verify-steps/s ratio.
- `step_ms`: the time one verify step takes as a request sees it = 1000 × the mean gap between the request's
  decode steps (`metrics/steps.py`: events < 1 ms apart are one step), over every step gap of the cell's ok
  requests. At concurrency c every running request takes part in each batched step, so this is the server's
  step time; steps that also prefilled new requests count as they happened.
- `full_draft_share`: the share of verify steps that accepted every draft position, = the acceptance rate at
  the last draft position (`metrics/accept_positions.py`: from SGLang's per-request histograms, H[last] / Σ H,
  or vLLM's per-position counters). Many full-draft steps (≥ `BINDING_SHARE`) mean the draft's size binds the
  accept length: a larger budget or depth has room. Few (< `FREE_SHARE`) mean the drafter's predictions limit
  it: a larger budget mostly adds verify cost. None where the server reports no per-position figures
  (llama.cpp's totals).
"""

from __future__ import annotations

from enum import StrEnum

BINDING_SHARE = 0.3
FREE_SHARE = 0.1


def verify_steps_per_s(output_tok_s: float | None, accept_length: float | None) -> float | None:
    """Verify steps per second of the cell, summed over its requests = output tok/s / accept length."""
    if output_tok_s is None or not accept_length or accept_length <= 0:
        return None
    return output_tok_s / accept_length


def step_ms(step_gap_mean_s: float | None) -> float | None:
    """Milliseconds per verify step = 1000 × the mean gap between a request's decode steps."""
    return None if step_gap_mean_s is None or step_gap_mean_s <= 0 else 1000 * step_gap_mean_s


def full_draft_share(by_position: list[dict] | None) -> float | None:
    """Share of verify steps that accepted every draft position = the last position's acceptance rate."""
    if not by_position:
        return None
    rate = by_position[-1].get("rate")
    return float(rate) if isinstance(rate, (int, float)) else None


class DraftLimit(StrEnum):
    """What limits a configuration's accept length, from its full-draft share."""

    DRAFT_SIZE = "the draft's size"  # ≥ BINDING_SHARE of steps accepted the whole draft: more budget has room
    DRAFTER = "the drafter"  # < FREE_SHARE accepted it: the drafter's guesses end the accepted run first
    BOTH = "both"
    UNKNOWN = "not reported"
    NO_DRAFT = "no draft"  # the configuration decodes one token a step


def draft_limit(share: float | None) -> DraftLimit:
    """`DraftLimit` of a full-draft share (`BINDING_SHARE`, `FREE_SHARE`)."""
    if share is None:
        return DraftLimit.UNKNOWN
    if share >= BINDING_SHARE:
        return DraftLimit.DRAFT_SIZE
    return DraftLimit.DRAFTER if share < FREE_SHARE else DraftLimit.BOTH
