"""Whether the server drifted during a run: the control cell measured first and again, judged beyond noise.

A figure F of the control cell (output tok/s, TTFT p50) *moved* when both hold:
1. beyond noise: the 95 % bootstrap intervals stored with the two measurements (`noise.intervals`, the
   cells' own `cell_noise` intervals) do not overlap; a measurement without an interval (fewer than 2 ok
   requests) counts as beyond noise, since it is judged by rule 2 alone;
2. by more than MIN_CHANGE: |F_again − F_first| / F_first > 0.20 (and, for TTFT, by more than
   MIN_TTFT_CHANGE_S = 10 ms: below that, a busy client host's own scheduling moves a TTFT of a few ms).

Rule 2 is there because the bootstrap only sees the noise between the requests of one cell: a long cell has
narrow intervals, and what changes from one measurement to the next (clock boost, prefix cache contents,
another tenant) moves a figure by a few per cent with disjoint intervals. 20 % is well beyond that spread (the
repeats of docs/definitions.md#noise differ by < 5 %): a move is worth a note, not yet a drift (below).

Judged only when both measurements hold at least MIN_OK_REQUESTS ok requests over at least MIN_WINDOW_S: a
shorter cell is dominated by what is not the server's state (the run's first cell opens its connections and
warms the client; a few ms of scheduling on a busy host), and a 4-request cell of 40 ms measured again was
seen "1.7× faster" on an unchanged simulator.

drifted = output tok/s or TTFT p50 moved by a factor of DRIFT_FACTOR = 2 or more (max(F_first/F_again,
F_again/F_first) ≥ 2). A failed verdict costs the run its exit code and the user's trust in every answer, so it
needs a change no busy host makes: on a clean server over a busy 2-core client host, the run's first cell
(cold: connections, client warm-up) measured again read up to 1.6× slower or faster with disjoint intervals,
while the real drifts seen were 8× (a server slowed for good) and 12× (issue 35's llama-server, 711 → 60
tok/s). A figure that moved by less than that is a note in the sentence ("no drift (moved 1.40×, < 2×): ctx
1024 c=4 …") and in `moved`, with no incident and no change of the exit code.

factor = first output tok/s ÷ again output tok/s: > 1 means the server got slower, < 1 faster (the sentence
says "N× slower" or "N× faster" with N = max(factor, 1/factor)); inf when the again measurement produced no
token. A control cell that produced nothing the first time cannot be compared (drifted False, factor nan, the
sentence says why).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from loadgen.metrics.confidence import overlap
from loadgen.record import CellKey

MIN_CHANGE = 0.20  # the smallest relative change of a figure that counts as moved (module docstring: why)
DRIFT_FACTOR = 2.0  # a moved figure drifted when it changed by this factor or more (module docstring: why)
TOK_S = "output_tok_s"
MIN_TTFT_CHANGE_S = 0.010  # and a TTFT p50 must move by more than this (module docstring: why)
TTFT_P50 = "ttft_s.p50"
MIN_OK_REQUESTS = 8  # fewer ok requests in either measurement: not judged (module docstring: why)
MIN_WINDOW_S = 1.0  # a shorter measured window in either: not judged


class CellResult(Protocol):
    """What drift reads of a cell: a `results.cell_result.CellResult` (named by its shape, since metrics/
    sits below results/)."""

    key: CellKey
    run_id: str | None
    requests: Any
    load: Any
    latency: Any
    throughput: Any
    noise: Any


@dataclass(frozen=True)
class ControlFigures:
    """One measurement of the control cell: the figures drift is judged on, with their 95 % intervals."""

    output_tok_s: float | None = None
    output_tok_s_interval: list[float] | None = None
    ttft_p50_s: float | None = None
    ttft_p50_s_interval: list[float] | None = None
    ok_requests: int = 0
    run_id: str | None = None
    duration_s: float | None = None

    @classmethod
    def of(cls, cell: CellResult) -> ControlFigures:
        intervals = cell.noise.intervals or {}
        ttft = cell.latency.ttft_s or {}
        return cls(cell.throughput.output_tok_s, intervals.get(TOK_S), ttft.get("p50"), intervals.get(TTFT_P50),
                   int((cell.requests.requests or {}).get("ok") or 0), cell.run_id, cell.load.duration_s)


@dataclass(frozen=True)
class Drift:
    """The verdict on the control cell measured first and again (module docstring: the rule)."""

    drifted: bool
    factor: float  # first output tok/s ÷ again: > 1 slower, < 1 faster
    sentence: str
    cell: dict = field(default_factory=dict)  # the control cell's key, as in the results' cells
    first: ControlFigures = field(default_factory=ControlFigures)
    again: ControlFigures = field(default_factory=ControlFigures)
    moved: list[str] = field(default_factory=list)  # which figures moved beyond noise: output_tok_s, ttft_s.p50
    min_change: float = MIN_CHANGE
    drift_factor: float = DRIFT_FACTOR  # a moved figure drifted when it changed by this factor or more

    def to_json(self) -> dict:
        out = asdict(self)
        out["factor"] = self.factor if math.isfinite(self.factor) else None  # JSON has no inf or nan
        return out

    @classmethod
    def from_json(cls, data: dict) -> Drift:
        first = ControlFigures(**(data.get("first") or {}))
        again = ControlFigures(**(data.get("again") or {}))
        factor = data.get("factor")
        return cls(bool(data["drifted"]), _factor(first.output_tok_s, again.output_tok_s) if factor is None
                   else float(factor), data.get("sentence") or "", data.get("cell") or {}, first, again,
                   list(data.get("moved") or []), float(data.get("min_change", MIN_CHANGE)),
                   float(data.get("drift_factor", DRIFT_FACTOR)))


def _factor(first: float | None, again: float | None) -> float:
    if not first:
        return math.nan
    return math.inf if not again else first / again


def change_factor(first: float | None, again: float | None) -> float:
    """How many times a figure changed, either way: max(first / again, again / first); inf when one is 0,
    1 when either is missing."""
    if first is None or again is None:
        return 1.0
    if first <= 0 or again <= 0:
        return 1.0 if first == again else math.inf
    return max(first / again, again / first)


def moved(first: float | None, again: float | None, first_ci: list[float] | None, again_ci: list[float] | None,
          min_change: float = MIN_CHANGE, min_abs: float = 0.0) -> bool:
    """Whether a figure moved: disjoint intervals (a missing one counts as disjoint), a relative change
    |again − first| / first above `min_change` and an absolute one above `min_abs`. A figure missing from
    either measurement did not move."""
    if first is None or again is None or first <= 0:
        return False
    change = abs(again - first)
    return change / first > min_change and change > min_abs and not overlap(first_ci, again_ci)


def judge_drift(first: CellResult, again: CellResult, min_change: float = MIN_CHANGE,
                drift_factor: float = DRIFT_FACTOR) -> Drift:
    """The control cell measured `first` and `again` (same key, same settings): drifted or not, how much, and
    the sentence that says it (module docstring: the rule)."""
    a, b = ControlFigures.of(first), ControlFigures.of(again)
    factor = _factor(a.output_tok_s, b.output_tok_s)
    found = []
    if _too_short(a) or (b.ok_requests and _too_short(b)):  # none ok again: the server stopped, judged
        where = cell_words(first)
        return Drift(False, factor, f"drift not judged: the control {where} is too short (fewer than "
                     f"{MIN_OK_REQUESTS} ok requests or {MIN_WINDOW_S:g} s)", first.key.as_dict(), a, b, [], min_change,
                     drift_factor)
    if moved(a.output_tok_s, b.output_tok_s or 0.0, a.output_tok_s_interval, b.output_tok_s_interval, min_change):
        found.append(TOK_S)
    if moved(a.ttft_p50_s, b.ttft_p50_s, a.ttft_p50_s_interval, b.ttft_p50_s_interval, min_change,
             MIN_TTFT_CHANGE_S):
        found.append(TTFT_P50)
    times = {TOK_S: change_factor(a.output_tok_s, b.output_tok_s or 0.0),
             TTFT_P50: change_factor(a.ttft_p50_s, b.ttft_p50_s)}
    large = [f for f in found if times[f] >= drift_factor]
    note = f" (moved {max(times[f] for f in found):.2f}×, < {drift_factor:g}×)" if found else ""
    sentence = _sentence(first, a, b, factor, large, note)
    return Drift(bool(large), factor, sentence, first.key.as_dict(), a, b, found, min_change, drift_factor)


def _too_short(m: ControlFigures) -> bool:
    return m.ok_requests < MIN_OK_REQUESTS or (m.duration_s or 0.0) < MIN_WINDOW_S


def cell_words(cell: CellResult) -> str:
    """"ctx 1024 c=4" (or "ctx 1024 rate=2/s")."""
    k = cell.key
    load = f"rate={k.request_rate:g}/s" if k.request_rate is not None else f"c={k.concurrency}"
    return f"ctx {k.context_tokens} {load}"


def _ms_or_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _sentence(cell: CellResult, a: ControlFigures, b: ControlFigures, factor: float, found: list[str],
              note: str) -> str:
    """The verdict said: `found` the figures that drifted, `note` how far a figure moved that did not drift
    (" (moved 1.63×, < 2×)"; "" when none moved)."""
    where = cell_words(cell)
    tok_s = f"{where} {a.output_tok_s or 0:.1f} → {b.output_tok_s or 0:.1f} tok/s"
    ttft = f"TTFT p50 {_ms_or_s(a.ttft_p50_s)} → {_ms_or_s(b.ttft_p50_s)}"
    if math.isnan(factor):
        return f"drift not judged: the control cell {where} produced no token when first measured"
    if not found:
        return f"no drift{note}: {tok_s}, {ttft}" + ("" if note else ", within noise")
    if TOK_S not in found:
        return f"the server's {ttft} changed during the run, beyond noise: {where}"
    if math.isinf(factor):
        return f"the server stopped producing tokens during the run: {tok_s}"
    way = "slower" if factor > 1 else "faster"
    times = max(factor, 1 / factor)
    return f"the server got {times:.1f}× {way} during the run: {tok_s}"
