"""Accept length (and queue depth) from the server's own Prometheus `/metrics`, scraped during the cell.

Scraped every `interval_s` from cell start to cell end; each scrape is reduced at once to a few running sums
(first/last counter totals, time-weighted gauge sums), so a long cell costs constant memory.

Figures (all over the cell's window [first scrape, last scrape]); the metric of each role is its adapter's
(loadgen/engines/, `MetricRole`; docs/engines.md lists them):

- `counters`, an engine that counts verify steps (SGLang): Δgenerated tokens / Δverify steps, each counter
  summed over all its label sets (DP ranks, is_streaming, ...). Both move when a request completes, so over a
  closed-loop cell they cover exactly the cell's requests: Σcompletion_tokens / Σverify_calls, the same
  quantity as the per-request figure.
- `counters`, an engine that counts drafts (vLLM, llama.cpp): 1 + Δaccepted tokens / Δdrafts (accepted drafts
  per verify step, plus the bonus token). Also `accept_rate` = Δaccepted / Δdraft tokens.
- `gauge`, an engine with an accept-length gauge (SGLang's, a mean over the scheduler's last
  `decode_log_interval` (40) decode steps): its time-average. Each reading describes the steps before it, so
  reading i is weighted by the time since reading i−1: gauge = Σ v_i·(t_i − t_{i−1}) / Σ (t_i − t_{i−1}).
  Readings taken before the gauge first changes within the cell are ignored: until its first refresh the gauge
  still shows a window from before the cell (the previous cell, or 0 after start-up). A refresh to the
  identical value cannot be seen; the first window counted may still hold up to 39 steps from before the cell.
- `accepted_per_position` (vLLM): Δaccepted tokens per `position` label, beside `drafts`;
  `metrics.accept_positions` turns them into the acceptance rate at each draft position.
- `aborted_requests`: Δ of the aborted-requests counter, the requests the server stopped because their client
  went away (`--cancel-fraction` shows here that the server noticed).
- `queue`: time-weighted means of the running and waiting request gauges, summed over DP ranks, keyed by
  their names without the engine's prefix (`num_running_reqs_mean`, `num_requests_waiting_mean`, ...).

Counter resets (the server restarted during the cell) are handled like Prometheus' increase(): a drop
starts a new segment, and the cell carries a warning. The metric names are the adapters' (loadgen/engines/,
by `MetricRole`); how one scrape is reduced (sums over label sets, one reading per DP group) is in
`engine_metrics`.
"""

from __future__ import annotations

import aiohttp

from loadgen.engines.registry import adapter, metrics_switches
from loadgen.names import ServerMetrics
from loadgen.telemetry.base import PeriodicSampler, SourceResult
from loadgen.telemetry.engine_metrics import (
    ABORTED,
    ACCEPT_GAUGES,
    COUNTERS,
    DRAFT_COUNTERS,
    QUEUE_GAUGES,
    QUEUE_KEYS,
    VERIFY_COUNTERS,
    WANTED,
    counter_totals,
    gauge_values,
    per_position_totals,
)
from loadgen.telemetry.promtext import Sample, parse_samples


class CounterDelta:
    """Increase of a counter over the window, Prometheus-style: a drop is a reset, counted from zero."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.delta = 0.0
        self.resets = 0

    def add(self, value: float) -> None:
        if self.last is not None:
            if value >= self.last:
                self.delta += value - self.last
            else:
                self.delta += value
                self.resets += 1
        self.last = value


class TimeWeighted:
    """Σ v_i·(t_i − t_{i−1}) / Σ (t_i − t_{i−1}): each reading stands for the interval before it."""

    def __init__(self) -> None:
        self.area = 0.0
        self.span_ns = 0
        self.n = 0
        self.last_value = 0.0

    def add(self, value: float, dt_ns: int) -> None:
        self.area += value * dt_ns
        self.span_ns += dt_ns
        self.n += 1
        self.last_value = value

    def mean(self) -> float | None:
        if self.n == 0:
            return None
        return self.area / self.span_ns if self.span_ns > 0 else self.last_value


class ServerMetricsSource(PeriodicSampler):
    """Scrapes `url` during one cell. `origin` says how the URL was chosen ("auto" or "--server-metrics")."""

    name = "server_metrics"
    kind = "accept_length"

    def __init__(self, url: str, interval_s: float = 1.0, origin: str = ServerMetrics.AUTO, timeout_s: float = 5.0):
        super().__init__(interval_s)
        self.url = url
        self.origin = origin
        self.timeout_s = timeout_s
        self.scrapes = 0
        self.counters = {name: CounterDelta() for name in COUNTERS}
        self.seen: set[str] = set()
        self.per_position: dict[int, CounterDelta] = {}  # vLLM: accepted tokens at each draft position
        self.gauge = TimeWeighted()
        self.gauge_start: float | None = None  # the value shown when the cell opened
        self.gauge_refreshed = False
        self.gauge_ignored = 0
        self.queues = {name: TimeWeighted() for name in QUEUE_GAUGES}
        self.last_t_ns: int | None = None
        self.first_t_ns: int | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        await super().start()

    async def stop(self) -> SourceResult:
        try:
            return await super().stop()
        finally:
            if self._session is not None:
                await self._session.close()

    async def sample(self, t_ns: int) -> None:
        assert self._session is not None, "sampled between start and stop only"
        async with self._session.get(self.url) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            text = await resp.text()
        self.ingest(parse_samples(text, WANTED), t_ns)

    def ingest(self, samples: list[Sample], t_ns: int) -> None:
        """Fold one scrape (taken at `t_ns`) into the running sums."""
        self.scrapes += 1
        for name, total in counter_totals(samples).items():
            self.seen.add(name)
            self.counters[name].add(total)
        for pos, total in per_position_totals(samples).items():
            self.per_position.setdefault(pos, CounterDelta()).add(total)
        gauges = gauge_values(samples)
        self.seen.update(gauges)
        dt_ns = t_ns - self.last_t_ns if self.last_t_ns is not None else 0
        if self.first_t_ns is None:
            self.first_t_ns = t_ns
        self.last_t_ns = t_ns
        for name, acc in self.queues.items():
            if name in gauges and dt_ns > 0:
                acc.add(gauges[name], dt_ns)
        gauge = next((g for g in ACCEPT_GAUGES if g in gauges), None)
        if gauge is not None:
            value = gauges[gauge]
            if self.gauge_start is None:
                self.gauge_start = value
                self.gauge_ignored += 1
            elif self.gauge_refreshed or value != self.gauge_start:
                self.gauge_refreshed = True
                self.gauge.add(value, dt_ns)
            else:
                self.gauge_ignored += 1

    # ---- result ----------------------------------------------------------------------------------------
    def result(self) -> SourceResult:
        values: dict = {"url": self.url, "scrapes": self.scrapes, "scrape_errors": len(self.errors)}
        warnings = []
        if self.scrapes == 0:
            why = self.errors[-1] if self.errors else "no answer"
            hint = (f"start {metrics_switches()}, or pass --server-metrics URL (or off)"
                    if self.origin == ServerMetrics.AUTO else "check the --server-metrics URL")
            reason = f"{self.url} could not be scraped ({why}); {hint}"
            values["unavailable"] = {"counters": reason, "gauge": reason}
            if self.origin != ServerMetrics.AUTO:
                warnings.append(f"server metrics: {reason}")
            return SourceResult(self.name, self.kind, False, values, reason=reason, warnings=warnings,
                                losses=list(warnings))
        losses = []
        if self.errors:
            losses.append(f"server metrics: {len(self.errors)} of {self.scrapes + len(self.errors)} scrapes "
                          f"of {self.url} failed ({self.errors[-1]})")
            warnings += losses
        if self.scrapes < 2:
            warnings.append("server metrics: only one scrape succeeded; counters need two")
        per_source: dict[str, float] = {}
        unavailable: dict[str, str] = {}
        self._counters(values, per_source, unavailable, warnings)
        self._gauge(values, per_source, unavailable)
        values["queue"] = {QUEUE_KEYS[name]: acc.mean() for name, acc in self.queues.items() if acc.n}
        assert self.last_t_ns is not None and self.first_t_ns is not None  # a scrape succeeded
        values["window_s"] = (self.last_t_ns - self.first_t_ns) / 1e9
        values["per_source"] = per_source
        values["unavailable"] = unavailable
        return SourceResult(self.name, self.kind, True, values, warnings=warnings, losses=losses)

    def _counters(self, values: dict, per_source: dict, unavailable: dict, warnings: list) -> None:
        d = {name: c.delta for name, c in self.counters.items() if name in self.seen}
        aborted = next((name for name in ABORTED if name in d), None)
        if aborted is not None:
            values["aborted_requests"] = d[aborted]
        if any(c.resets for c in self.counters.values()):
            warnings.append("server metrics: a counter went backwards during the cell (server restarted?); "
                            "counted from the restart like Prometheus increase()")
        engine = next((e for e, (drafts, _, accepted) in DRAFT_COUNTERS.items() if drafts in d and accepted in d),
                      None)
        verifying = next((e for e, names in VERIFY_COUNTERS.items() if all(n in d for n in names)), None)
        generating = next((e for e, (generated, _) in VERIFY_COUNTERS.items() if generated in d), None)
        if engine is not None:
            self._draft_counters(engine, d, values, per_source, unavailable)
        elif verifying is not None:
            generated, verify = VERIFY_COUNTERS[verifying]
            values[verifying] = {"generation_tokens": d[generated], "verify_calls": d[verify]}
            if d[verify] > 0:
                per_source["counters"] = d[generated] / d[verify]
            else:
                unavailable["counters"] = f"{verify} did not move during the cell (speculative decoding off?)"
        elif generating is not None:
            verify = VERIFY_COUNTERS[generating][1]
            why = next(m.absent for m in adapter(generating).metrics if m.name == verify)
            unavailable["counters"] = f"the server exports no {verify} ({why}, or speculative decoding is off)"
        else:
            steps = [names[1] for names in VERIFY_COUNTERS.values()] + [n[0] for n in DRAFT_COUNTERS.values()]
            unavailable["counters"] = "the server exports neither " + " nor ".join(steps)

    def _draft_counters(self, engine: str, d: dict, values: dict, per_source: dict, unavailable: dict) -> None:
        """1 + Δaccepted / Δdrafts, and the accept rate, of an engine that counts its drafts."""
        drafts, draft_tokens, accepted = DRAFT_COUNTERS[engine]
        values[engine] = {"drafts": d[drafts], "accepted_tokens": d[accepted], "draft_tokens": d.get(draft_tokens)}
        if self.per_position:
            n = max(self.per_position) + 1
            values[engine]["accepted_per_position"] = [self.per_position[i].delta if i in self.per_position
                                                       else None for i in range(n)]
        if d[drafts] > 0:
            per_source["counters"] = 1.0 + d[accepted] / d[drafts]
            if d.get(draft_tokens):
                values[engine]["accept_rate"] = d[accepted] / d[draft_tokens]
        else:
            unavailable["counters"] = f"{drafts} did not move during the cell (speculative decoding off?)"

    def _gauge(self, values: dict, per_source: dict, unavailable: dict) -> None:
        values["gauge"] = {"readings_used": self.gauge.n, "readings_ignored": self.gauge_ignored,
                           "value_at_start": self.gauge_start}
        mean = self.gauge.mean()
        gauge = next((g for g in ACCEPT_GAUGES if g in self.seen), None)
        if gauge is None:
            drafts_of = {names[0]: engine for engine, names in DRAFT_COUNTERS.items()}
            engine = next((drafts_of[n] for n in drafts_of if n in self.seen), None)
            unavailable["gauge"] = (f"{adapter(engine).title} exports no accept-length gauge" if engine
                                    else "the server exports no " + " nor ".join(ACCEPT_GAUGES) + " gauge")
        elif mean is None:
            unavailable["gauge"] = (f"{gauge} did not refresh during the cell (it refreshes "
                                    "every decode_log_interval steps; longer cells or a shorter "
                                    "--telemetry-interval help)")
        elif mean <= 0:
            unavailable["gauge"] = f"{gauge} reads 0 (speculative decoding off)"
        else:
            per_source["gauge"] = mean


class Unavailable:
    """A source that was not configured: it reports why for each figure it would have given."""

    kind = "accept_length"

    def __init__(self, name: str, reasons: dict[str, str]):
        self.name = name
        self.reasons = reasons

    async def start(self) -> None:
        pass

    async def stop(self) -> SourceResult:
        return SourceResult(self.name, self.kind, False, {"unavailable": dict(self.reasons)},
                            reason="; ".join(sorted(set(self.reasons.values()))))

