"""A Ray worker's monotonic clock mapped onto the driver's (`--ray`): CLOCK_MONOTONIC is per host, so a record
stamped on another node is moved onto the driver's time base before any sink or figure sees it.

One exchange: the driver sends a ping at its time `t0`, the worker stamps `t_w` when it answers, the answer
arrives at driver time `t1`. Were both legs equally long, the worker read its clock at driver time
(t0 + t1) / 2, so

    offset_ns = (t0 + t1) / 2 − t_w            (driver time = worker time + offset_ns)
    uncertainty_ns = (t1 − t0) / 2             (the worst case: all of the round trip on one leg)

Of several exchanges the one with the shortest round trip is kept (least queueing, smallest uncertainty);
its uncertainty is half the best round trip. Intervals measured on one node (TTFT, ITL) are exact whatever
the offset; only times compared across nodes (a cell's window, arrivals) carry the uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadgen.record import Record

MAX_UNCERTAINTY_NS = 5_000_000  # a node mapped worse than 5 ms is named before any load
PINGS = 16  # exchanges per mapping: the best of 16 round trips on a quiet LAN is within a few µs of the floor

_TIMES = ("t_intended_ns", "t_sent_ns", "t_first_byte_ns", "t_first_token_ns", "t_last_token_ns", "t_end_ns",
          "t_first_reasoning_ns", "t_first_answer_ns")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One ping-pong: driver send time, worker answer time, driver receive time (monotonic ns)."""

    t0_ns: int
    t_worker_ns: int
    t1_ns: int

    @property
    def rtt_ns(self) -> int:
        return self.t1_ns - self.t0_ns


@dataclass(frozen=True, slots=True)
class ClockMap:
    """driver time = worker time + `offset_ns`, within ± `uncertainty_ns` (half the best round trip)."""

    offset_ns: int
    uncertainty_ns: int
    exchanges: int = 1

    def to_driver(self, t_worker_ns: int) -> int:
        return t_worker_ns + self.offset_ns

    def to_worker(self, t_driver_ns: int) -> int:
        return t_driver_ns - self.offset_ns

    def as_dict(self) -> dict:
        return {"offset_ns": self.offset_ns, "uncertainty_ns": self.uncertainty_ns, "exchanges": self.exchanges}


SAME_CLOCK = ClockMap(0, 0, 0)


def clock_map(exchanges: list[Exchange]) -> ClockMap:
    """The mapping from the exchange of the shortest round trip (module docstring)."""
    if not exchanges:
        raise ValueError("no clock exchange to map from")
    best = min(exchanges, key=lambda e: e.rtt_ns)
    if best.rtt_ns < 0:
        raise ValueError(f"an exchange answered before it was sent: {best}")
    offset = (best.t0_ns + best.t1_ns) // 2 - best.t_worker_ns
    return ClockMap(offset, (best.rtt_ns + 1) // 2, len(exchanges))


def shift_record(rec: Record, offset_ns: int) -> Record:
    """The record with every monotonic time moved by `offset_ns` (gaps between chunks are intervals: kept)."""
    if not offset_ns:
        return rec
    return replace(rec, **{name: t + offset_ns for name in _TIMES if (t := getattr(rec, name))})


def too_uncertain(maps: dict[str, ClockMap], bound_ns: int = MAX_UNCERTAINTY_NS) -> list[str]:
    """The nodes whose mapping is less certain than `bound_ns`, each as `name (± x ms)`."""
    return [f"{name} (± {m.uncertainty_ns / 1e6:.1f} ms)" for name, m in maps.items() if m.uncertainty_ns > bound_ns]
