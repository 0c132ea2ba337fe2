"""Open-loop load: requests arrive on a precomputed schedule at a target rate, whatever the server does.

`--request-rate R[,R…]` makes one cell per rate per context (CellKey.request_rate = R, concurrency = the cap
or 0); `--ramp R0:R1:S` makes one ramp cell per context and reports the sustainable rate. Request i of a cell
is due at t0 + offset_i (offsets from `loadgen.arrivals`, drawn once, seeded by --seed, law and rate — the
same schedule for every context, so contexts compare on identical arrivals). `t_intended_ns` = that due time.
A request waits for a slot when `--max-concurrency` requests are in flight (an asyncio.Semaphore: a cap on
concurrency, not a rate limiter, so the schedule alone sets the rate); the wait is client queueing and shows
as lateness = t_sent − t_intended, never as lost time. Latency is reported both from the intended send time
(corrected for coordinated omission) and from the actual send (uncorrected); see docs/open_loop.md.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loadgen import arrivals
from loadgen.cli import CONFIGURERS, OPTION_GROUPS, RUNNER_HOOKS
from loadgen.config import parse_float_list
from loadgen.errors import UsageError
from loadgen.record import CellKey, Record
from loadgen.scheduler import CellRun
from loadgen.stats import percentile
from loadgen.workload import seeded_rng

NS = 1e9
DEFAULT_SPAN_S = 10.0  # default measured requests of a rate cell: max(16, ⌈10 s × rate⌉)
MIN_WINDOW_REQUESTS = 10  # a ramp window with fewer requests is not judged (its p99 would be its max)
MIN_RAMP_REQUESTS = 2 * MIN_WINDOW_REQUESTS
SLEEP_SLICE_S = 0.25  # the scheduler wakes this often at least: an interrupt is seen between sparse arrivals


# ---- cell figures (one function per metric) ----------------------------------------------------------------
def schedule_request_rate(recs: Sequence[Record]) -> float | None:
    """Realised rate of the schedule = (n − 1) / (max t_intended − min t_intended), measured records."""
    if len(recs) < 2:
        return None
    span = max(r.t_intended_ns for r in recs) - min(r.t_intended_ns for r in recs)
    return (len(recs) - 1) * NS / span if span > 0 else None


def achieved_request_rate(recs: Sequence[Record]) -> float | None:
    """Achieved request rate = (n − 1) / (max t_sent − min t_sent) over the measured records that were sent
    (every outcome counts: a request that failed still arrived at the server).

    n − 1 gaps over the span of actual sends, the same estimator as `schedule_request_rate`, so a client that
    keeps up reads the schedule's rate exactly, and one that sends late (cap full, event loop busy) reads
    lower: the sends stretch over a longer span. Completions per second is a different figure (throughput)."""
    sent = [r.t_sent_ns for r in recs if r.t_sent_ns]
    if len(sent) < 2:
        return None
    span = max(sent) - min(sent)
    return (len(sent) - 1) * NS / span if span > 0 else None


def corrected_ttft_s(r: Record) -> float:
    """TTFT from the intended send, for the SLO: t_first_token − t_intended; +inf when no token came."""
    if not r.ok or r.t_first_token_ns is None:
        return math.inf
    return (r.t_first_token_ns - r.t_intended_ns) / NS


# ---- ramp: the sustainable rate -------------------------------------------------------------------------
@dataclass(frozen=True)
class Ramp:
    r0: float
    r1: float
    duration_s: float

    def rate_at(self, t_s: float) -> float:
        return arrivals.ramp_rate(self.r0, self.r1, self.duration_s, t_s)

    @property
    def mean_rate(self) -> float:
        """Mean target rate of the ramp = Λ(S)/S = (r0 + r1)/2."""
        return (self.r0 + self.r1) / 2


def window_p99(t_s: Sequence[float], ttft_s: Sequence[float], end_s: float,
               window_s: float) -> tuple[float, int]:
    """(p99, n) of TTFT over the requests intended in (end − window, end] (`t_s` ascending); p99 is +inf when
    a failed request reaches the top 1 %, nan when the window is empty."""
    vals = ttft_s[bisect_right(t_s, end_s - window_s):bisect_right(t_s, end_s)]
    if not vals:
        return math.nan, 0
    with np.errstate(invalid="ignore"):
        p = percentile(vals, 99)
    return (math.inf if math.isnan(p) else p), len(vals)  # inf − inf interpolates to nan: a failure, so inf


def sustainable_rate(t_s: Sequence[float], ttft_s: Sequence[float], ramp: Ramp, slo_s: float, window_s: float,
                     min_requests: int = MIN_WINDOW_REQUESTS) -> dict:
    """Where TTFT p99 first crossed the SLO on a ramp, and the offered rate that was still sustained.

    Input: per measured request, its intended send time t (s from the ramp start, ascending) and its TTFT from
    the intended send (+inf when it failed). Sliding window: at each request j, W_j = the requests with
    t in (t_j − window_s, t_j]; W_j is judged when it holds ≥ `min_requests` requests (fewer would make its
    p99 its maximum) and breaches when p99(W_j) > slo_s (p99: linear interpolation between order statistics).
    With j* the first breaching window: `sustainable_request_rate` = r(t_{j*−1}), the ramp's target rate at
    the last request before it. None when the first judged window already breached (lower R0); r(t_last)
    with `held` = True when no window breached (a lower bound: raise R1).
    """
    out = {"sustainable_request_rate": None, "held": False, "crossed_at_s": None, "rate_at_cross": None,
           "ttft_p99_at_cross_s": None, "windows_judged": 0}
    for j in range(len(t_s)):
        p99, n = window_p99(t_s, ttft_s, t_s[j], window_s)
        if n < min_requests:
            continue
        out["windows_judged"] += 1
        if p99 > slo_s:
            out.update(crossed_at_s=t_s[j], rate_at_cross=ramp.rate_at(t_s[j]),
                       ttft_p99_at_cross_s=p99 if math.isfinite(p99) else None)
            if out["windows_judged"] > 1:
                out["sustainable_request_rate"] = ramp.rate_at(t_s[j - 1])
            return out
    if out["windows_judged"]:
        out.update(sustainable_request_rate=ramp.rate_at(t_s[-1]), held=True)
    return out


def ramp_series(t_s: Sequence[float], ttft_s: Sequence[float], ramp: Ramp, window_s: float) -> list[dict]:
    """The sliding window on a grid every window/2 s (for plots): target rate and TTFT p99 at each end."""
    out = []
    end = window_s
    while end <= ramp.duration_s + 1e-9:
        p99, n = window_p99(t_s, ttft_s, end, window_s)
        out.append({"t_s": round(end, 6), "target_request_rate": ramp.rate_at(end), "requests": n,
                    "ttft_p99_s": p99 if math.isfinite(p99) else None})
        end += window_s / 2
    return out


# ---- the driver ------------------------------------------------------------------------------------------
async def open_loop(run: CellRun, due_ns: Sequence[int], cap: int | None) -> None:
    """Send job i at the absolute monotonic time due_ns[i] (t_intended_ns = due_ns[i]), at once when late.

    With a cap, a due request first waits for one of `cap` slots; later requests queue behind it in order
    (the semaphore is FIFO), each keeping its own due time. On stop no new request goes; in-flight ones end.
    """
    slots = asyncio.Semaphore(cap) if cap else None
    tasks: set[asyncio.Task] = set()

    async def one(job, due: int) -> None:
        try:
            await run.issue(job, due)
        finally:
            if slots is not None:
                slots.release()

    try:
        for due in due_ns:
            while not run.stopping and (delay_ns := due - time.monotonic_ns()) > 0:
                await asyncio.sleep(min(delay_ns / NS, SLEEP_SLICE_S))
            if slots is not None:
                await slots.acquire()
            job = run.take()
            if job is None:
                if slots is not None:
                    slots.release()
                break
            task = asyncio.create_task(one(job, due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
    finally:
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)


@dataclass
class Options:
    rates: list[float]
    law: str
    burstiness: float | None
    cap: int | None
    ramp: Ramp | None
    slo_ttft_s: float | None
    ramp_window_s: float | None

    @classmethod
    def from_extras(cls, x: dict) -> Options | None:
        if not x.get("request_rate") and not x.get("ramp"):
            return None
        ramp = Ramp(x["ramp"]["r0"], x["ramp"]["r1"], x["ramp"]["duration_s"]) if x.get("ramp") else None
        slo = x["slo_ttft_ms"] / 1e3 if x.get("slo_ttft_ms") else None
        return cls(x.get("request_rate") or [], x["arrival"], x.get("burstiness"), x.get("max_concurrency"),
                   ramp, slo, x.get("ramp_window_s"))


class OpenLoop:
    """Adapts a Runner to open-loop cells: its cell list, request counts, load pattern and cell figures."""

    def __init__(self, runner, opts: Options):
        self.runner = runner
        self.opts = opts
        self.offsets: dict[CellKey, list[float]] = {}
        self.records: dict[CellKey, list[Record]] = {}
        self.t0_ns: dict[CellKey, int] = {}
        self._assemble = runner.assemble
        self._run = runner.run

    def install(self) -> None:
        r = self.runner
        r.cells_to_run, r.requests_for, r.drive = self.cells_to_run, self.requests_for, self.drive
        r.assemble, r.run = self.assemble, self.run

    def cells_to_run(self) -> list[CellKey]:
        o, cap = self.opts, self.opts.cap or 0
        rates = [o.ramp.r1] if o.ramp else o.rates
        return [CellKey(ctx, cap, request_rate=r) for ctx in self.runner.cfg.contexts for r in rates]

    def schedule(self, cell: CellKey) -> list[float]:
        """Offsets (s) of every request of the cell, warmup first; drawn once per cell."""
        if cell not in self.offsets:
            o, cfg = self.opts, self.runner.cfg
            rng = seeded_rng(cfg.seed, "arrivals", o.law, o.burstiness, cell.request_rate,
                             o.ramp.r0 if o.ramp else None)
            if o.ramp:
                offs = arrivals.ramp_offsets_s(o.law, o.ramp.r0, o.ramp.r1, o.ramp.duration_s, rng,
                                               o.burstiness)
            elif cfg.duration_per_cell_s:
                offs = arrivals.offsets_for_span_s(o.law, cell.request_rate, cfg.duration_per_cell_s, rng,
                                                   o.burstiness, lead=cfg.warmup)
            else:
                n = cfg.requests_per_cell or default_requests(cell.request_rate)
                offs = arrivals.offsets_s(o.law, cell.request_rate, cfg.warmup + n, rng, o.burstiness)
            self.offsets[cell] = offs
        return self.offsets[cell]

    def requests_for(self, cell: CellKey) -> int:
        return max(0, len(self.schedule(cell)) - self.runner.cfg.warmup)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        run.deadline_ns = None  # the schedule ends the cell: one late past --duration-per-cell still goes
        measured = self.records[cell] = []
        forward = run.on_record

        def on_record(rec: Record) -> None:
            if rec.phase == "measure":
                measured.append(rec)
            forward(rec)

        run.on_record = on_record
        t0 = self.t0_ns[cell] = time.monotonic_ns()
        await open_loop(run, [t0 + round(o * NS) for o in self.schedule(cell)], self.opts.cap)

    def assemble(self, cell: CellKey, summary: dict, results) -> dict:
        entry = self._assemble(cell, summary, results)
        recs = sorted(self.records.get(cell, []), key=lambda r: r.t_intended_ns)
        o = self.opts
        entry["target_request_rate"] = o.ramp.mean_rate if o.ramp else cell.request_rate
        entry["schedule_request_rate"] = schedule_request_rate(recs)
        entry["achieved_request_rate"] = achieved_request_rate(recs)
        entry["arrival"] = {"law": o.law, "burstiness": o.burstiness, "max_concurrency": o.cap}
        if o.ramp:
            t0 = self.t0_ns.get(cell, 0)
            t_s = [(r.t_intended_ns - t0) / NS for r in recs]
            ttft = [corrected_ttft_s(r) for r in recs]
            window = o.ramp_window_s or o.ramp.duration_s / 10
            verdict = sustainable_rate(t_s, ttft, o.ramp, o.slo_ttft_s, window)
            entry["sustainable_request_rate"] = verdict["sustainable_request_rate"]
            entry["ramp"] = {"r0": o.ramp.r0, "r1": o.ramp.r1, "duration_s": o.ramp.duration_s,
                             "slo_ttft_s": o.slo_ttft_s, "window_s": window, **verdict,
                             "series": ramp_series(t_s, ttft, o.ramp, window)}
        return entry

    async def run(self) -> int:
        o = self.opts
        load = (f"ramp {o.ramp.r0:g}→{o.ramp.r1:g} req/s over {o.ramp.duration_s:g} s" if o.ramp
                else "rates " + ",".join(f"{r:g}" for r in o.rates) + " req/s")
        burst = f" (burstiness {o.burstiness:g})" if o.law == "gamma" else ""
        print(f"open loop: {o.law} arrivals{burst}, {load}, cap {o.cap or 'none'} (--concurrency is not used)",
              file=sys.stderr, flush=True)
        rc = await self._run()
        print(render(self.runner.cells))
        return rc


def default_requests(rate: float) -> int:
    """Measured requests of a rate cell without --requests-per-cell: max(16, ⌈10 s × rate⌉)."""
    return max(16, math.ceil(DEFAULT_SPAN_S * rate))


# ---- terminal -------------------------------------------------------------------------------------------
COLUMNS = [("ctx", 6), ("rate/s", 11), ("cap", 4), ("sched/s", 8), ("achvd/s", 8), ("ok/fail", 9),
           ("TTFT50 snd", 10), ("int", 8), ("TTFT99 snd", 10), ("int", 8), ("E2E50 snd", 9), ("int", 7),
           ("E2E99 snd", 9), ("int", 7), ("late50", 7), ("late99", 7), ("lateMax", 8), ("note", 0)]


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def _s(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _rate(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def render_row(cell: dict) -> str:
    ramp = cell.get("ramp")
    load = f"{ramp['r0']:g}→{ramp['r1']:g}" if ramp else f"{cell['request_rate']:g}"
    req = cell.get("requests") or {}
    tt, tti = cell.get("ttft_s") or {}, cell.get("ttft_from_intended_s") or {}
    e2, e2i = cell.get("e2e_s") or {}, cell.get("e2e_from_intended_s") or {}
    late = cell.get("send_lateness_s") or {}
    client = cell.get("client") or {}
    notes = []
    if client.get("saturated"):
        notes.append("CLIENT-BOUND: " + "; ".join(client.get("reasons", [])))
    if cell.get("status", "ok") != "ok":
        notes.append(f"{cell['status'].upper()}: {cell.get('error') or ''}")
    values = [str(cell["context_tokens"]), load, str(cell["concurrency"] or "-"),
              _rate(cell.get("schedule_request_rate")), _rate(cell.get("achieved_request_rate")),
              f"{req.get('ok', 0)}/{req.get('failed', 0)}",
              _ms(tt.get("p50")), _ms(tti.get("p50")), _ms(tt.get("p99")), _ms(tti.get("p99")),
              _s(e2.get("p50")), _s(e2i.get("p50")), _s(e2.get("p99")), _s(e2i.get("p99")),
              _ms(late.get("p50")), _ms(late.get("p99")), _ms(late.get("max")), " | ".join(notes)]
    return " ".join(v.rjust(w) if w else v for v, (_, w) in zip(values, COLUMNS))


def ramp_line(cell: dict) -> str:
    """The one number people ask for, with how it was found."""
    r = cell["ramp"]
    head = (f"ramp ctx={cell['context_tokens']} {r['r0']:g}→{r['r1']:g} req/s over {r['duration_s']:g} s, "
            f"SLO TTFT p99 ≤ {r['slo_ttft_s'] * 1e3:g} ms "
            f"(from intended send, {r['window_s']:g} s windows): ")
    if r["windows_judged"] == 0:
        return head + f"no window held {MIN_WINDOW_REQUESTS} requests; lengthen --ramp-window or the ramp"
    if r["held"]:
        return head + (f"never crossed; sustainable request rate ≥ {r['sustainable_request_rate']:.2f} req/s "
                       f"(raise R1)")
    at_cross = r["ttft_p99_at_cross_s"]
    p99 = "a failed request" if at_cross is None else f"{at_cross * 1e3:.0f} ms"
    if r["sustainable_request_rate"] is None:
        return head + f"crossed in the first window ({p99} at {r['rate_at_cross']:.2f} req/s); lower R0"
    return head + (f"sustainable request rate {r['sustainable_request_rate']:.2f} req/s "
                   f"(crossed at t={r['crossed_at_s']:.2f} s, {r['rate_at_cross']:.2f} req/s: p99 {p99})")


def render(cells: list[dict]) -> str:
    """The open-loop table: latency from the actual send (snd, uncorrected) and from the intended send (int,
    corrected for client queueing), achieved vs scheduled rate, and lateness; then one line per ramp."""
    rows = [c for c in cells if c.get("request_rate") is not None]
    if not rows:
        return ""
    lines = [("open loop — snd: from the actual send (uncorrected); int: from the intended send (corrected). "
              "TTFT and lateness in ms, E2E in s"),
             " ".join(name.rjust(w) if w else name for name, w in COLUMNS)]
    lines += [render_row(c) for c in rows]
    lines += [ramp_line(c) for c in rows if c.get("ramp")]
    return "\n".join(lines)


# ---- command line ---------------------------------------------------------------------------------------
def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("open loop (requests arrive at a rate; replaces --concurrency)")
    g.add_argument("--request-rate", metavar="R[,R...]",
                   help="requests per second; a list makes one cell per rate per context")
    g.add_argument("--arrival", choices=arrivals.LAWS,
                   help="arrival law: constant | poisson (default) | gamma (needs --burstiness)")
    g.add_argument("--burstiness", type=float, metavar="B",
                   help="gamma arrivals: CV² of the gaps = 1/B (B<1 burstier than Poisson, 1 = Poisson, >1 "
                        "more regular)")
    g.add_argument("--max-concurrency", type=int, metavar="N",
                   help="cap on requests in flight; a due request waits for a slot and counts as late")
    g.add_argument("--ramp", metavar="R0:R1:S",
                   help="raise the rate linearly from R0 to R1 req/s over S seconds and report the "
                        "sustainable rate (needs --slo-ttft-ms)")
    g.add_argument("--slo-ttft-ms", type=float, metavar="MS",
                   help="ramp: the TTFT p99 (from the intended send) the sustainable rate must meet")
    g.add_argument("--ramp-window", type=float, metavar="S",
                   help="ramp: sliding window of the TTFT p99 in seconds (default S/10)")


def parse_ramp(text: str) -> dict:
    parts = text.split(":")
    try:
        r0, r1, s = (float(x) for x in parts)
    except ValueError:
        raise UsageError(f"--ramp {text!r}: give R0:R1:S as three numbers, e.g. --ramp 1:40:60") from None
    if not all(math.isfinite(x) for x in (r0, r1, s)) or not (0 <= r0 < r1 and s > 0):
        raise UsageError(f"--ramp {text!r}: needs 0 ≤ R0 < R1 and S > 0 (finite), e.g. --ramp 1:40:60")
    return {"r0": r0, "r1": r1, "duration_s": s}


def configure(a: argparse.Namespace, cfg) -> None:
    rates = parse_float_list("--request-rate", a.request_rate) if a.request_rate else None
    if rates and not all(math.isfinite(r) for r in rates):
        raise UsageError("--request-rate: rates must be finite; for all requests at once use --concurrency")
    if rates and len(set(rates)) < len(rates):
        raise UsageError(f"--request-rate {a.request_rate}: a rate appears twice; give each rate once")
    ramp = parse_ramp(a.ramp) if a.ramp else None
    open_loop_on = bool(rates or ramp)
    if rates and ramp:
        raise UsageError("--request-rate and --ramp exclude each other; give one of them")
    for flag, value in (("--arrival", a.arrival), ("--max-concurrency", a.max_concurrency),
                        ("--burstiness", a.burstiness)):
        if value is not None and not open_loop_on:
            raise UsageError(f"{flag} applies to open-loop load; add --request-rate R or --ramp R0:R1:S")
    law = a.arrival or "poisson"
    if a.burstiness is not None and law != "gamma":
        raise UsageError("--burstiness shapes gamma arrivals only; add --arrival gamma or drop --burstiness")
    if law == "gamma" and a.burstiness is None:
        raise UsageError("--arrival gamma needs --burstiness B (CV² = 1/B: 0.5 bursty, 1 Poisson, 4 regular)")
    if a.burstiness is not None and not (a.burstiness > 0 and math.isfinite(a.burstiness)):
        raise UsageError(f"--burstiness {a.burstiness}: must be a finite number > 0")
    if a.max_concurrency is not None and a.max_concurrency < 1:
        raise UsageError(f"--max-concurrency {a.max_concurrency}: must be ≥ 1 (leave it out for no cap)")
    if (a.slo_ttft_ms is not None or a.ramp_window is not None) and not ramp:
        raise UsageError("--slo-ttft-ms and --ramp-window belong to a ramp; add --ramp R0:R1:S")
    if ramp:
        if a.slo_ttft_ms is None or not a.slo_ttft_ms > 0:
            raise UsageError("--ramp needs --slo-ttft-ms MS > 0: the TTFT p99 that defines 'sustainable'")
        if a.ramp_window is not None and not 0 < a.ramp_window <= ramp["duration_s"]:
            raise UsageError(f"--ramp-window {a.ramp_window}: must be > 0 and ≤ the ramp's "
                             f"{ramp['duration_s']:g} s")
        expected = (ramp["r0"] + ramp["r1"]) / 2 * ramp["duration_s"]
        if expected < cfg.warmup + MIN_RAMP_REQUESTS:
            raise UsageError(f"--ramp {a.ramp}: only about {expected:.0f} arrivals; the sustainable rate "
                             f"needs ≥ {cfg.warmup + MIN_RAMP_REQUESTS} (raise the rates or lengthen S)")
    cfg.extras.update(request_rate=rates, arrival=law if open_loop_on else None, burstiness=a.burstiness,
                      max_concurrency=a.max_concurrency, ramp=ramp, slo_ttft_ms=a.slo_ttft_ms,
                      ramp_window_s=a.ramp_window)


def install(runner) -> None:
    opts = Options.from_extras(runner.cfg.extras)
    if opts is not None:
        OpenLoop(runner, opts).install()


OPTION_GROUPS.append(add_options)
CONFIGURERS.append(configure)
RUNNER_HOOKS.append(install)
