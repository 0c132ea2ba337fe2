"""The confidence intervals of a cell's key figures from its ok requests (`confidence.bootstrap_intervals`),
and across the repeats of a cell (`confidence.repeat_interval`). The key figures are the catalog's that `--repeat`
averages (`catalog.KEY_FIGURES`); each is named by its path in the cell's JSON ("ttft_s.p50"), so the tables and
compare read the figure and its interval by the same name. The bootstrap resamples those with a spec here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.confidence import (
    LEVEL,
    RESAMPLES,
    SEED,
    STATISTICS,
    Spec,
    bootstrap_intervals,
    ratio_spec,
    repeat_interval,
    scaled,
)
from loadgen.metrics.record_table import ABSENT, INT, RecordTable, or_zero
from loadgen.metrics.request_columns import RequestColumns
from loadgen.names import AcceptSource
from loadgen.record import Record

BOOTSTRAP = "bootstrap"
REPEATS = "t over repeats"


def accept_spec(ok: Sequence[Record] | RecordTable, source: str | None) -> Spec | None:
    """What the accept length's interval resamples where it comes from the cell's requests: per_request =
    Σ tokens / Σ spec_verify_ct, chunks = Σ tokens / Σ (chunks − 1), as `metrics.accept`; None for the server's
    counters, gauge or log (one value per cell: nothing to resample)."""
    t = RecordTable.of(ok)
    tokens = or_zero(t.ints("completion_tokens"))
    if source == AcceptSource.PER_REQUEST:
        steps, kinds = t.spec_numbers("spec_verify_ct")
        verified = (kinds != ABSENT) & (steps != 0)  # a spec that gives a (non-zero) number of verify steps
        if not verified.all():  # the usual cell: every request's steps, used in place (no copies at the peak)
            tokens, steps, kinds = tokens[verified], steps[verified], kinds[verified]
        return ratio_spec(tokens, steps if (kinds == INT).all() else np.trunc(steps))  # int(steps): truncated
    if source == AcceptSource.CHUNKS:
        chunks = t.ints("chunks")
        multi = (chunks >= 2) & (tokens != 0)
        return ratio_spec(tokens[multi], chunks[multi] - 1)
    return None


def cell_intervals(records: Sequence[Record] | RecordTable, window_s: float, accept_source: str | None) -> dict:
    """{figure path: [low, high]} for the key figures (`catalog.KEY_FIGURES`) that have a spec here (bootstrap over
    the ok requests, one set of draws for the figures of as many requests: `confidence.bootstrap_intervals`).

    output_tok_s = Σ tokens / window is written as (Σ tokens / Σ e2e) · (Σ e2e / window): the first factor,
    each slot's delivery rate, is bootstrapped over the ok requests; the second, the load the slots carried
    (achieved concurrency of the ok requests), is the cell's design and held fixed."""
    ok = RecordTable.of(records).ok()
    cols = RequestColumns.of(ok)
    e2e = cols.e2e_s()
    specs: dict[str, Spec | None] = {
        "output_tok_s": ratio_spec(or_zero(cols.completion_tokens), e2e) if window_s > 0 else None,
        "request_tok_s.mean": ([cols.request_tok_s()], STATISTICS["mean"]),
        "ttft_s.p50": ([cols.ttft_s()], STATISTICS["p50"]),
        "e2e_s.mean": ([e2e], STATISTICS["mean"]),
        "accept_length.value": accept_spec(ok, accept_source),
    }
    found = bootstrap_intervals({k: spec for k, spec in specs.items() if spec is not None})
    if found.get("output_tok_s") is not None:
        found["output_tok_s"] = scaled(found["output_tok_s"], sum(e2e.tolist()) / window_s)  # Python's sum: in order
    return {k: v for k, v in found.items() if v is not None}


def bootstrap_method(samples: int) -> dict:
    """How the one-measurement intervals were made (stored beside them)."""
    return {"method": BOOTSTRAP, "level": LEVEL, "resamples": RESAMPLES, "seed": SEED, "samples": samples}


def repeats_figures(values: dict[str, list[float | None]]) -> tuple[dict, dict]:
    """(mean of each key figure over the repeats, its t interval), from each figure's value per repeat; a
    figure some repeat lacks gets neither."""
    means, intervals = {}, {}
    for path, per_repeat in values.items():
        present = [v for v in per_repeat if v is not None]
        if not per_repeat or len(present) < len(per_repeat):
            continue
        means[path] = sum(present) / len(present)
        interval = repeat_interval(present)
        if interval is not None:
            intervals[path] = interval
    return means, intervals
