"""Accept length from a set of records: the server's per-request counts (verify-weighted), or the client's
chunk-based estimate. Used for a cell (`metrics.cell`) and for each category of a cell (`metrics.category`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.record_table import ABSENT, RecordTable, or_zero
from loadgen.names import AcceptSource
from loadgen.record import Record


def accept_length_chunks(ok: Sequence[Record] | RecordTable) -> float | None:
    """Client estimate of accept length = Σ completion_tokens / Σ (chunks − 1), over ok requests with ≥ 2 chunks.

    The first content chunk is the prefill's single token; every later chunk is one verify step, so
    chunks − 1 estimates the server's verify count (exact when the server streams every step; it reads high
    when the server merges steps into one chunk, e.g. stream_interval > 1), and the ratio is comparable with
    Σcompletion/Σverify."""
    t = RecordTable.of(ok)
    chunks, tokens = t.ints("chunks"), or_zero(t.ints("completion_tokens"))
    multi = (chunks >= 2) & (tokens != 0)
    steps = int((chunks[multi] - 1).sum())
    return int(tokens[multi].sum()) / steps if steps else None


def accept_length_per_request(ok: Sequence[Record] | RecordTable) -> float | None:
    """Server per-request accept length, verify-weighted = Σ completion_tokens / Σ spec_verify_ct
    (not a mean of per-request means; int(spec_verify_ct), over the requests whose count is a finite number ≠ 0)."""
    t = RecordTable.of(ok)
    values, kinds = t.spec_numbers("spec_verify_ct")
    has = (kinds != ABSENT) & (values != 0) & np.isfinite(values)
    verify = int(np.trunc(values[has]).astype(np.int64).sum())
    tokens = int(or_zero(t.ints("completion_tokens"))[has].sum())
    return tokens / verify if verify else None


def accept_length_best(ok: Sequence[Record] | RecordTable) -> dict:
    """{value, source}: the per-request server figure (`accept_length_per_request`) where the server gave
    verify counts, else the chunk estimate (`accept_length_chunks`), else None with source None."""
    t = RecordTable.of(ok)
    value = accept_length_per_request(t)
    if value is not None:
        return {"value": value, "source": AcceptSource.PER_REQUEST}
    value = accept_length_chunks(t)
    return {"value": value, "source": AcceptSource.CHUNKS if value is not None else None}
