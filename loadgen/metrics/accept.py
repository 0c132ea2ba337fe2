"""Accept length from a set of records: the server's per-request counts (verify-weighted), or the client's
chunk-based estimate. Used for a cell (`metrics.cell`) and for each category of a cell (`metrics.category`)."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.names import AcceptSource
from loadgen.record import Record


def accept_length_chunks(ok: Sequence[Record]) -> float | None:
    """Client estimate of accept length = Σ completion_tokens / Σ (chunks − 1), over ok requests with ≥ 2 chunks.

    The first content chunk is the prefill's single token; every later chunk is one verify step, so
    chunks − 1 estimates the server's verify count (exact when the server streams every step; it reads high
    when the server merges steps into one chunk, e.g. stream_interval > 1), and the ratio is comparable with Σcompletion/Σverify."""
    multi = [r for r in ok if r.chunks >= 2 and r.completion_tokens]
    steps = sum(r.chunks - 1 for r in multi)
    return sum(r.completion_tokens or 0 for r in multi) / steps if steps else None


def accept_length_per_request(ok: Sequence[Record]) -> float | None:
    """Server per-request accept length, verify-weighted = Σ completion_tokens / Σ spec_verify_ct
    (not a mean of per-request means)."""
    verify = sum(int(r.spec["spec_verify_ct"]) for r in ok if r.spec and r.spec.get("spec_verify_ct"))
    tokens = sum(r.completion_tokens or 0 for r in ok if r.spec and r.spec.get("spec_verify_ct"))
    return tokens / verify if verify else None


def accept_length_best(ok: Sequence[Record]) -> dict:
    """{value, source}: the per-request server figure (`accept_length_per_request`) where the server gave
    verify counts, else the chunk estimate (`accept_length_chunks`), else None with source None."""
    value = accept_length_per_request(ok)
    if value is not None:
        return {"value": value, "source": AcceptSource.PER_REQUEST}
    value = accept_length_chunks(ok)
    return {"value": value, "source": AcceptSource.CHUNKS if value is not None else None}
