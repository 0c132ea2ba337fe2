"""Latency targets and goodput (`--slo`): whether a request is good, and the cell's attainment and goodput.

One formula per figure (docs/definitions.md#slo), read by the cell's result, the table and the live exporter:

- a request's values: TTFT = t_first_token − t_sent; TPOT = (t_last_token − t_first_token) / (tokens − 1)
  (vLLM's definition); ITL = the request's own p99 per-token inter-token latency (`request.itl_pairs`);
  E2E = t_end − t_sent; TTFT from intended = t_first_token − t_intended (open loop, coordinated omission).
- a target is met by a request that succeeded and whose value is ≤ the target. A value that does not exist
  for a request that succeeded meets it when the request gives it no chance to be late: TPOT and ITL of a
  request with fewer than two tokens (vLLM counts TPOT as 0 there); TTFT of a request that never produced a
  token does not exist and is not met.
- a request is good when it succeeded and met every target; failed, cancelled and never-sent requests are
  not good, and count in the denominator: attainment = good / scheduled, scheduled = measured records +
  measured requests never sent. Requests abandoned by design (`--cancel-fraction`: the client closed them on
  purpose) are judged by no target and are left out of the denominator (`judged`).
- goodput = good / window (requests/s), good output tok/s = Σ completion_tokens of good requests / window,
  over the cell's measured window; met = attainment ≥ the required attainment (`--slo-attainment`).
- misses = scheduled − good; first-wave misses = the misses among a closed-loop cell's first wave, its first
  C judged requests by send time (each slot's first request, C = the cell's concurrency; no wave in an open
  loop). Only where the misses were: the attainment above is the one formula, the first wave included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from loadgen.metrics.request import e2e_s, itl_pairs, tpot_s, ttft_from_intended_s, ttft_s
from loadgen.metrics.stats import weighted_percentile
from loadgen.names import Outcome, SloMetric
from loadgen.record import Record

Targets = Mapping[str, float]  # SloMetric → the most the request's value may be, in seconds


def itl_p99_s(r: Record) -> float | None:
    """The request's own p99 per-token inter-token latency (weighted by tokens, `request.itl_pairs`)."""
    values, weights = itl_pairs(r)
    return weighted_percentile(values, weights, 99)


VALUES: dict[SloMetric, Callable[[Record], float | None]] = {
    SloMetric.TTFT: ttft_s,
    SloMetric.TPOT: tpot_s,
    SloMetric.ITL: itl_p99_s,
    SloMetric.E2E: e2e_s,
    SloMetric.TTFT_FROM_INTENDED: ttft_from_intended_s,
}
NO_CHANCE_TO_BE_LATE = frozenset({SloMetric.TPOT, SloMetric.ITL})  # undefined below two tokens: met


def meets(r: Record, metric: str, target_s: float) -> bool:
    """The request succeeded and its value of `metric` is ≤ `target_s` (module docstring for a missing one)."""
    if not r.ok:
        return False
    value = VALUES[SloMetric(metric)](r)
    if value is None:
        return SloMetric(metric) in NO_CHANCE_TO_BE_LATE
    return value <= target_s


def is_good(r: Record, targets: Targets) -> bool:
    """Succeeded and met every target."""
    return r.ok and all(meets(r, m, t) for m, t in targets.items())


def judged(r: Record) -> bool:
    """The request counts towards the SLO: every measured request but those abandoned by design."""
    return r.outcome != Outcome.ABANDONED


class SloTally:
    """Good and scheduled requests of one cell so far, as records end (the live exporter, an early stop)."""

    def __init__(self, targets: Targets):
        self.targets = dict(targets)
        self.good = 0
        self.ended = 0

    def add(self, r: Record) -> bool:
        """Count one ended request (one abandoned by design is not counted, `judged`); whether it was good."""
        if not judged(r):
            return False
        good = is_good(r, self.targets)
        self.good += good
        self.ended += 1
        return good

    @property
    def attainment(self) -> float | None:
        """good / ended so far (None before the first)."""
        return self.good / self.ended if self.ended else None

    def miss_certain(self, planned: int, required: float) -> bool:
        """Even if every request not ended yet is good, good / planned < required."""
        return planned > 0 and (self.good + max(0, planned - self.ended)) / planned < required


def first_wave(recs: Sequence[Record], slots: int) -> list[Record]:
    """The first `slots` requests by send time (module docstring); none without slots."""
    return sorted(recs, key=lambda r: r.t_sent_ns)[:slots] if slots > 0 else []


def slo_figures(recs: Sequence[Record], targets: Targets, required: float, window_s: float,
                not_sent: int = 0, slots: int = 0) -> dict:
    """The cell's SLO figures (module docstring): targets, scheduled, good, attainment, per-target attainment,
    goodput requests/s, good output tok/s, met; misses, and those of the first wave of `slots` requests."""
    recs = [r for r in recs if judged(r)]
    wave = first_wave([r for r in recs if r.t_sent_ns], slots)
    scheduled = len(recs) + not_sent
    good = [r for r in recs if is_good(r, targets)]
    per_target = {m: _share(sum(meets(r, m, t) for r in recs), scheduled) for m, t in targets.items()}
    attainment = _share(len(good), scheduled)
    return {
        "targets_s": dict(targets), "attainment_required": required, "scheduled": scheduled, "good": len(good),
        "attainment": attainment, "per_target": per_target,
        "goodput_requests_s": len(good) / window_s if window_s > 0 else None,
        "good_output_tok_s": sum(r.completion_tokens or 0 for r in good) / window_s if window_s > 0 else None,
        "met": attainment is not None and attainment >= required,
        "misses": scheduled - len(good), "first_wave": len(wave),
        "first_wave_misses": sum(not is_good(r, targets) for r in wave),
    }


def _share(n: int, total: int) -> float | None:
    return n / total if total else None
