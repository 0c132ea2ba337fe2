"""Accept length (and queue depth) from the server's own Prometheus `/metrics`, scraped during the cell.

Scraped every `interval_s` from cell start to cell end; each scrape is reduced at once to a few running sums
(first/last counter totals, time-weighted gauge sums), so a long cell costs constant memory.

Figures (all over the cell's window [first scrape, last scrape]):

- `counters` (SGLang): Δsglang:generation_tokens_total / Δsglang:spec_verify_calls_total, each counter summed
  over all its label sets (DP ranks, is_streaming, ...). Both move when a request completes, so over a
  closed-loop cell they cover exactly the cell's requests: Σcompletion_tokens / Σverify_calls, the same
  quantity as the per-request figure.
- `counters` (vLLM, and llama.cpp under `llamacpp:` with the same names and meaning):
  1 + Δ…spec_decode_num_accepted_tokens_total / Δ…spec_decode_num_drafts_total (accepted drafts per verify
  step, plus the bonus token). Also `accept_rate` = Δaccepted / Δdraft_tokens.
- `gauge` (SGLang): time-average of `sglang:spec_accept_length`, a mean over the scheduler's last
  `decode_log_interval` (40) decode steps. Each reading describes the steps before it, so reading i is
  weighted by the time since reading i−1: gauge = Σ v_i·(t_i − t_{i−1}) / Σ (t_i − t_{i−1}). Readings taken before the
  gauge first changes within the cell are ignored: until its first refresh the gauge still shows a window from
  before the cell (the previous cell, or 0 after start-up). A refresh to the identical value cannot be seen;
  the first window counted may still hold up to 39 steps from before the cell.
- `accepted_per_position` (vLLM): Δvllm:spec_decode_num_accepted_tokens_per_pos_total per `position` label,
  beside `drafts`; `metrics.accept_positions` turns them into the acceptance rate at each draft position.
- `aborted_requests` (SGLang): Δsglang:num_aborted_requests_total, the requests the server stopped because
  their client went away (`--cancel-fraction` shows here that the server noticed).
- `queue`: time-weighted means of the running and waiting request gauges (SGLang num_running_reqs /
  num_queue_reqs, vLLM num_requests_running / num_requests_waiting), summed over DP ranks.

Counter resets (the server restarted during the cell) are handled like Prometheus' increase(): a drop
starts a new segment, and the cell carries a warning. The metric names, and how one scrape is reduced
(sums over label sets, one reading per DP group), are in `engine_metrics`.
"""

from __future__ import annotations

import aiohttp

from loadgen.telemetry.base import PeriodicSampler, SourceResult
from loadgen.telemetry.engine_metrics import (
    COUNTERS,
    DRAFT_COUNTERS,
    QUEUE_GAUGES,
    SG_ABORTED,
    SG_GAUGE,
    SG_GEN,
    SG_VERIFY,
    WANTED,
    counter_totals,
    gauge_values,
    per_position_totals,
)
from loadgen.telemetry.promtext import Sample, parse_samples

ENGINE_NAMES = {"vllm": "vLLM", "llamacpp": "llama.cpp"}


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

    def __init__(self, url: str, interval_s: float = 1.0, origin: str = "auto", timeout_s: float = 5.0):
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
            await self._session.close()

    async def sample(self, t_ns: int) -> None:
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
        if SG_GAUGE in gauges:
            value = gauges[SG_GAUGE]
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
            hint = ("start SGLang with --enable-metrics (llama-server with --metrics), or pass --server-metrics "
                    "URL (or off)"
                    if self.origin == "auto" else "check the --server-metrics URL")
            reason = f"{self.url} could not be scraped ({why}); {hint}"
            values["unavailable"] = {"counters": reason, "gauge": reason}
            if self.origin != "auto":
                warnings.append(f"server metrics: {reason}")
            return SourceResult(self.name, self.kind, False, values, reason=reason, warnings=warnings)
        if self.errors:
            warnings.append(f"server metrics: {len(self.errors)} of {self.scrapes + len(self.errors)} scrapes "
                            f"of {self.url} failed ({self.errors[-1]})")
        if self.scrapes < 2:
            warnings.append("server metrics: only one scrape succeeded; counters need two")
        per_source: dict[str, float] = {}
        unavailable: dict[str, str] = {}
        self._counters(values, per_source, unavailable, warnings)
        self._gauge(values, per_source, unavailable)
        values["queue"] = {name.split(":", 1)[1] + "_mean": acc.mean() for name, acc in self.queues.items()
                           if acc.n}
        values["window_s"] = (self.last_t_ns - self.first_t_ns) / 1e9
        values["per_source"] = per_source
        values["unavailable"] = unavailable
        return SourceResult(self.name, self.kind, True, values, warnings=warnings)

    def _counters(self, values: dict, per_source: dict, unavailable: dict, warnings: list) -> None:
        d = {name: c.delta for name, c in self.counters.items() if name in self.seen}
        if SG_ABORTED in d:
            values["aborted_requests"] = d[SG_ABORTED]
        if any(c.resets for c in self.counters.values()):
            warnings.append("server metrics: a counter went backwards during the cell (server restarted?); "
                            "counted from the restart like Prometheus increase()")
        engine = next((e for e, (drafts, _, accepted) in DRAFT_COUNTERS.items() if drafts in d and accepted in d),
                      None)
        if engine is not None:
            drafts, draft_tokens, accepted = DRAFT_COUNTERS[engine]
            values[engine] = {"drafts": d[drafts], "accepted_tokens": d[accepted],
                              "draft_tokens": d.get(draft_tokens)}
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
        elif SG_VERIFY in d and SG_GEN in d:
            values["sglang"] = {"generation_tokens": d[SG_GEN], "verify_calls": d[SG_VERIFY]}
            if d[SG_VERIFY] > 0:
                per_source["counters"] = d[SG_GEN] / d[SG_VERIFY]
            else:
                unavailable["counters"] = "sglang:spec_verify_calls_total did not move during the cell " \
                                          "(speculative decoding off?)"
        elif SG_GEN in d:
            unavailable["counters"] = "the server exports no sglang:spec_verify_calls_total (SGLang builds " \
                                      "before 2026 lack it, or speculative decoding is off)"
        else:
            unavailable["counters"] = "the server exports neither sglang:spec_verify_calls_total nor " \
                                      "vllm:spec_decode_num_drafts_total nor llamacpp:spec_decode_num_drafts_total"

    def _gauge(self, values: dict, per_source: dict, unavailable: dict) -> None:
        values["gauge"] = {"readings_used": self.gauge.n, "readings_ignored": self.gauge_ignored,
                           "value_at_start": self.gauge_start}
        mean = self.gauge.mean()
        if SG_GAUGE not in self.seen:
            drafts_of = {names[0]: engine for engine, names in DRAFT_COUNTERS.items()}
            engine = next((drafts_of[n] for n in drafts_of if n in self.seen), None)
            unavailable["gauge"] = (f"{ENGINE_NAMES[engine]} exports no accept-length gauge" if engine
                                    else "the server exports no sglang:spec_accept_length gauge")
        elif mean is None:
            unavailable["gauge"] = ("sglang:spec_accept_length did not refresh during the cell (it refreshes "
                                    "every decode_log_interval steps; longer cells or a shorter "
                                    "--telemetry-interval help)")
        elif mean <= 0:
            unavailable["gauge"] = "sglang:spec_accept_length reads 0 (speculative decoding off)"
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

