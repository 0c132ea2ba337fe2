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

import numpy as np

from loadgen.metrics.record_table import NONE, RecordTable, or_zero
from loadgen.metrics.request import e2e_s, itl_pairs, tpot_s, ttft_from_intended_s, ttft_s
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.stats import weighted_percentile
from loadgen.metrics.steady import sent_mask
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


def row_values_s(recs: Sequence[Record] | RecordTable, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(value, has) of `metric` for every row: the value `VALUES[metric]` gives its record (float64, nan where
    it gives None) and where it gives one. TTFT, TPOT, E2E and TTFT from intended from the rows' columns
    (`request_columns`, bit-for-bit `request.py`'s); ITL from each request's own chunks, so the ok rows are
    read whole (a cell with an ITL target keeps its chunks)."""
    t = RecordTable.of(recs)
    cols = RequestColumns.of(t)
    has = np.zeros(len(t), dtype=bool)
    found = SloMetric(metric)
    if found in (SloMetric.TTFT, SloMetric.TTFT_FROM_INTENDED):
        has = cols.t_first_token_ns != NONE
        values = cols.ttft_s() if found == SloMetric.TTFT else cols.ttft_from_intended_s()
    elif found == SloMetric.E2E:
        has[:] = True
        values = cols.e2e_s()
    elif found == SloMetric.TPOT:
        has = cols.has_decode_rate()
        values = cols.tpot_s()
    else:
        ok = t.ok_mask()
        itl = [itl_p99_s(r) for r in t.records(ok)]
        has[np.flatnonzero(ok)[[v is not None for v in itl]]] = True
        values = np.array([v for v in itl if v is not None], dtype=np.float64)
    out = np.full(len(t), np.nan)
    out[has] = values
    return out, has


def meets_rows(recs: Sequence[Record] | RecordTable, metric: str, target_s: float) -> np.ndarray:
    """`meets` of every row, from the rows' values (`row_values_s`): the request succeeded and its value is
    ≤ `target_s`, or it has none and `metric` gives it no chance to be late."""
    t = RecordTable.of(recs)
    values, has = row_values_s(t, metric)
    with np.errstate(invalid="ignore"):
        met = np.where(has, values <= target_s, SloMetric(metric) in NO_CHANCE_TO_BE_LATE)
    return t.ok_mask() & met


def good_rows(recs: Sequence[Record] | RecordTable, targets: Targets) -> np.ndarray:
    """`is_good` of every row: succeeded and met every target."""
    t = RecordTable.of(recs)
    good = t.ok_mask().copy()
    for metric, target_s in targets.items():
        good &= meets_rows(t, metric, target_s)
    return good


def first_wave_rows(recs: Sequence[Record] | RecordTable, slots: int) -> np.ndarray:
    """The rows of the first `slots` requests by send time, of those sent (module docstring); none without
    slots."""
    t = RecordTable.of(recs)
    if slots <= 0:
        return np.zeros(0, dtype=np.int64)
    sent = np.flatnonzero(sent_mask(t))
    return sent[np.argsort(t.ints("t_sent_ns")[sent], kind="stable")[:slots]]


def slo_figures(recs: Sequence[Record] | RecordTable, targets: Targets, required: float, window_s: float,
                not_sent: int = 0, slots: int = 0) -> dict:
    """The cell's SLO figures (module docstring): targets, scheduled, good, attainment, per-target attainment,
    goodput requests/s, good output tok/s, met; misses, and those of the first wave of `slots` requests."""
    all_rows = RecordTable.of(recs)
    t = all_rows.where(all_rows.labels("outcome") != Outcome.ABANDONED)  # the judged requests
    scheduled = len(t) + not_sent
    met = {m: meets_rows(t, m, target_s) for m, target_s in targets.items()}
    good = t.ok_mask().copy()
    for each in met.values():
        good &= each
    n_good = int(good.sum())
    per_target = {m: _share(int(each.sum()), scheduled) for m, each in met.items()}
    attainment = _share(n_good, scheduled)
    wave = first_wave_rows(t, slots)
    good_tokens = int(or_zero(t.ints("completion_tokens"))[good].sum())
    return {
        "targets_s": dict(targets), "attainment_required": required, "scheduled": scheduled, "good": n_good,
        "attainment": attainment, "per_target": per_target,
        "goodput_requests_s": n_good / window_s if window_s > 0 else None,
        "good_output_tok_s": good_tokens / window_s if window_s > 0 else None,
        "met": attainment is not None and attainment >= required,
        "misses": scheduled - n_good, "first_wave": len(wave),
        "first_wave_misses": int((~good[wave]).sum()),
    }


def _share(n: int, total: int) -> float | None:
    return n / total if total else None
