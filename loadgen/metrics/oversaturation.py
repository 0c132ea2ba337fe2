"""Whether a search's probe finds the server plainly over-saturated, from the requests that ended so far and
the probe below it (pure).

Over-saturated = latency climbing while throughput no longer grows, against the reference of the nearest
lower load the search measured (its output tok/s and its median TTFT):
- latency climbing: the median TTFT from the intended send (`request.ttft_from_intended_s`: it holds the
  client's queue in open loop and equals TTFT in closed loop) of the ok requests that ended ≥ CLIMB × the
  reference's median TTFT;
- throughput not growing with the load: output tok/s so far (Σ completion_tokens of the ok requests that
  ended / (last end − first send)) ÷ the reference's ≤ 1 + NOISE + SHARE × (load ÷ the reference's load − 1):
  it grew by less than a quarter of what the load grew, beyond 5 % of noise (16 streams against 8 on a
  server with 8 slots: ≤ 1.30; 9 against 8: ≤ 1.08).
A first probe has no reference and is never judged over-saturated. At least `min_ended` ok requests are needed
(the early stop asks for two waves of a closed loop, 2 × C, or half its planned requests when that is fewer: the
first wave's ramp, every slot starting at once, then weighs at most about half of the throughput so far), and
never fewer than MIN_ENDED.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadgen.metrics.request import ttft_from_intended_s
from loadgen.metrics.stats import percentile
from loadgen.record import Record

CLIMB = 1.5
NOISE = 0.05
SHARE = 0.25
MIN_ENDED = 8
NS = 1e9


@dataclass(frozen=True)
class Reference:
    """The nearest lower probe: its name (for the message), its load, output tok/s and median TTFT (s)."""

    name: str
    load: float
    output_tok_s: float
    ttft_p50_s: float


def oversaturated(ended: Sequence[Record], ref: Reference | None, load: float,
                  min_ended: int = MIN_ENDED) -> str | None:
    """The evidence ('TTFT median 12 → 95 ms while output tok/s 5801 → 5790, from c=8') when the requests that
    ended at `load` show the over-saturation signature against `ref`, else None."""
    ok = [r for r in ended if r.ok]
    if ref is None or len(ok) < max(MIN_ENDED, min_ended):
        return None
    ttft = percentile([t for r in ok if (t := ttft_from_intended_s(r)) is not None], 50)
    span_s = (max(r.t_end_ns for r in ok) - min(r.t_sent_ns for r in ended)) / NS
    if ttft is None or span_s <= 0:
        return None
    tok_s = sum(r.completion_tokens or 0 for r in ok) / span_s
    flat = 1 + NOISE + SHARE * max(0.0, load / ref.load - 1)
    if ttft < CLIMB * ref.ttft_p50_s or tok_s > flat * ref.output_tok_s:
        return None
    return (f"TTFT median {ref.ttft_p50_s * 1e3:.0f} → {ttft * 1e3:.0f} ms while output tok/s "
            f"{ref.output_tok_s:.0f} → {tok_s:.0f}, from {ref.name}")
