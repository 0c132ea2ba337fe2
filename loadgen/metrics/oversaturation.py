"""Whether a search's probe finds the server plainly over-saturated, from the requests that ended so far and
the probe below it (pure).

Over-saturated = latency climbing while throughput no longer grows, against the reference of the nearest
lower load the search measured (its output tok/s and its median TTFT):
- latency climbing: the median TTFT from the intended send (`request.ttft_from_intended_s`: it holds the
  client's queue in open loop and equals TTFT in closed loop) of the ok requests that ended ≥ CLIMB × the
  reference's median TTFT;
- throughput not growing: output tok/s so far (Σ completion_tokens of the ok requests that ended / (last
  end − first send)) ≤ FLAT × the reference's output tok/s.
A first probe has no reference and is never judged over-saturated. At least MIN_ENDED ok requests are needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadgen.metrics.request import ttft_from_intended_s
from loadgen.metrics.stats import percentile
from loadgen.record import Record

CLIMB = 1.5
FLAT = 1.1
MIN_ENDED = 8
NS = 1e9


@dataclass(frozen=True)
class Reference:
    """The nearest lower probe: its load (for the message), output tok/s and median TTFT (s)."""

    load: str
    output_tok_s: float
    ttft_p50_s: float


def oversaturated(ended: Sequence[Record], ref: Reference | None) -> str | None:
    """The evidence ('TTFT median 12 → 95 ms while output tok/s 5801 → 5790 (c=8 → now)') when the requests that
    ended show the over-saturation signature against `ref`, else None."""
    ok = [r for r in ended if r.ok]
    if ref is None or len(ok) < MIN_ENDED:
        return None
    ttft = percentile([t for r in ok if (t := ttft_from_intended_s(r)) is not None], 50)
    span_s = (max(r.t_end_ns for r in ok) - min(r.t_sent_ns for r in ended)) / NS
    if ttft is None or span_s <= 0:
        return None
    tok_s = sum(r.completion_tokens or 0 for r in ok) / span_s
    if ttft < CLIMB * ref.ttft_p50_s or tok_s > FLAT * ref.output_tok_s:
        return None
    return (f"TTFT median {ref.ttft_p50_s * 1e3:.0f} → {ttft * 1e3:.0f} ms while output tok/s "
            f"{ref.output_tok_s:.0f} → {tok_s:.0f}, from {ref.load}")
