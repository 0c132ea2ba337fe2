"""Live Prometheus metrics of a run (`loadgen --metrics-port`): a Sink that serves what it has seen.

Names, labels and meanings are listed in docs/metrics.md. Each finished request is observed once, when
`record()` hands it over (TTFT, E2E, per-request rate, send lateness), and its chunk gaps once each (ITL);
nothing here runs on the client's per-chunk path. The exporter owns its registry, so two runs in one
process (tests, sweeps) never share series, and `_created` series are switched off because Prometheus 2.x
ingests them as ordinary series.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import math
import socket
import threading
from dataclasses import dataclass

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from loadgen.record import OUTCOMES, CellKey, Record

# Buckets are dense where docs/observability.md's alerts and SLOs sit: TTFT 0.5-2 s, ITL 2-100 ms.
TTFT_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                  1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
ITL_BUCKETS_S = (0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.0125, 0.015,
                 0.0175, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.125, 0.15,
                 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
E2E_BUCKETS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0,
                 60.0, 90.0, 120.0, 180.0, 300.0, 600.0)
REQUEST_RATE_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 75.0, 100.0, 125.0,
                        150.0, 200.0, 250.0, 300.0, 400.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0)
LATENESS_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                      5.0)

CELL_LABELS = ("run", "concurrency", "context_tokens")
LAG_SAMPLE_S = 0.1
LAG_WINDOW = 10  # samples: the lag gauge is the largest lag of the last second


class TokenWeightedHistogram:
    """A classic histogram where one observation stands for `n` tokens.

    `observe(gap_s, n)` adds `n` to the bucket of the per-token latency `gap_s / n` and `gap_s` once to
    `_sum`, as SGLang's `observe_inter_token_latency` does; so `_count` counts tokens and
    `rate(_sum) / rate(_count)` is the mean per-token latency even when one chunk carries several tokens.
    prometheus_client's Histogram has no weighted observe, hence this Collector.
    """

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], buckets: tuple[float, ...]):
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = tuple(sorted(buckets))
        self._le = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def touch(self, labelvalues: tuple[str, ...]) -> None:
        """Create the series at zero, so it is scraped before its first observation."""
        with self._lock:
            self._state(labelvalues)

    def observe(self, labelvalues: tuple[str, ...], gap_s: float, n: int) -> None:
        idx = bisect.bisect_left(self.bounds, gap_s / n)
        with self._lock:
            counts, total = self._state(labelvalues)
            counts[idx] += n
            total[0] += gap_s

    def _state(self, labelvalues):
        state = self._series.get(labelvalues)
        if state is None:
            state = self._series[labelvalues] = ([0] * (len(self.bounds) + 1), [0.0])
        return state

    def describe(self):
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self):
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            snapshot = [(k, list(c), t[0]) for k, (c, t) in self._series.items()]
        for labelvalues, counts, total in snapshot:
            cumulative, buckets = 0, []
            for le, c in zip(self._le, counts):
                cumulative += c
                buckets.append((le, cumulative))
            family.add_metric(list(labelvalues), buckets, total)
        yield family


def summary_value(summary: dict, path: str) -> float | None:
    """`summary["a"]["b"]` for path "a.b" as a finite float; None when any step is missing, None or NaN.

    Booleans count as 0/1 (`client.saturated`).
    """
    node = summary
    for key in path.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return None
        node = node[key]
    if isinstance(node, bool):
        return float(node)
    if not isinstance(node, (int, float)) or not math.isfinite(node):
        return None
    return float(node)


# summary path -> gauge attribute, for the per-cell gauges set when a cell's summary is final
CELL_SUMMARY_GAUGES = {
    "accept_length.value": "accept_length",
    "power.mean_w_total": "gpu_power",
    "power.j_per_output_token": "j_per_token",
    "power.output_tokens_per_j": "tokens_per_j",
    "output_tok_s": "cell_tok_s",
    "client.loop_lag_p99_s": "cell_loop_lag_p99",
}


@dataclass
class _CellSeries:
    """The label children of one cell, looked up once per cell instead of once per record."""

    key: tuple[str, str, str]
    requests: dict
    prompt_tokens: Counter
    output_tokens: Counter
    chunks: Counter
    ttft: Histogram
    e2e: Histogram
    request_rate: Histogram
    lateness: Histogram


class LiveExporter:
    """Sink serving the run's live metrics on http://host:port/metrics from the running event loop.

    `await start()` binds (port 0 = a free one; `.port` tells which), the Sink hooks update the metrics,
    `await aclose()` keeps serving `linger_s` more seconds (so the last values get scraped: two scrape
    intervals by default) and stops.
    """

    def __init__(self, run_id: str, host: str = "127.0.0.1", port: int = 0, linger_s: float = 10.0,
                 registry: CollectorRegistry | None = None):
        prometheus_client.disable_created_metrics()
        self.run_id = run_id
        self.host = host
        self.port = port
        self.linger_s = linger_s
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._make_metrics(self.registry)
        self._cells: dict[tuple[str, str, str], _CellSeries] = {}
        self._active: tuple[str, str, str] | None = None
        self._in_flight = 0
        self._lags: collections.deque[float] = collections.deque(maxlen=LAG_WINDOW)
        self._runner: web.AppRunner | None = None
        self._lag_task: asyncio.Task | None = None
        self._closed = False
        self._init_run_gauges(run_id)

    def _make_metrics(self, r: CollectorRegistry) -> None:
        cell, run = CELL_LABELS, ("run",)
        self.requests = Counter("loadgen_requests_total", "Requests ended, by outcome.", cell + ("outcome",),
                                registry=r)
        self.prompt_tokens = Counter("loadgen_prompt_tokens_total", "Prompt tokens of ok requests (server usage).",
                                     cell, registry=r)
        self.output_tokens = Counter("loadgen_output_tokens_total",
                                     "Completion tokens of ok requests (server usage).", cell, registry=r)
        self.chunks = Counter("loadgen_chunks_total", "Content chunks of ok requests.", cell, registry=r)
        self.ttft = Histogram("loadgen_ttft_seconds", "Time from the actual send to the first content chunk.",
                              cell, buckets=TTFT_BUCKETS_S, registry=r)
        self.e2e = Histogram("loadgen_e2e_latency_seconds", "Time from the actual send to the end of the stream "
                             "(ok requests).", cell, buckets=E2E_BUCKETS_S, registry=r)
        self.request_rate = Histogram("loadgen_request_output_tokens_per_second",
                                      "Per-request decode rate (completion_tokens-1)/(t_last_token-t_first_token).",
                                      cell, buckets=REQUEST_RATE_BUCKETS, registry=r)
        self.lateness = Histogram("loadgen_send_lateness_seconds", "Actual send time minus intended send time.",
                                  cell, buckets=LATENESS_BUCKETS_S, registry=r)
        self.itl = TokenWeightedHistogram("loadgen_itl_seconds", "Per-token inter-token latency: each chunk gap "
                                          "spread over the chunk's tokens.", cell, ITL_BUCKETS_S)
        r.register(self.itl)
        self.in_flight = Gauge("loadgen_in_flight_requests", "Requests sent and not yet ended.", run, registry=r)
        self.target_concurrency = Gauge("loadgen_target_concurrency", "Current cell's concurrency "
                                        "(open loop: its cap, 0 = none).", run, registry=r)
        self.context_tokens = Gauge("loadgen_context_tokens", "Current cell's prompt length in tokens.", run,
                                    registry=r)
        self.cell_active = Gauge("loadgen_cell_active", "1 while the cell runs, 0 once it has ended.", cell,
                                 registry=r)
        self.loop_lag = Gauge("loadgen_event_loop_lag_seconds", "Largest event-loop lag of the client over the "
                              "last second.", run, registry=r)
        self.saturated = Gauge("loadgen_client_saturated", "1 when the last finished cell's client was saturated "
                               "(its results are invalid).", run, registry=r)
        self.target_rate = Gauge("loadgen_target_request_rate", "Open loop: the cell's target request rate "
                                 "(requests/s).", run, registry=r)
        self.achieved_rate = Gauge("loadgen_achieved_request_rate", "Open loop: the last finished cell's "
                                   "achieved request rate (requests/s).", run, registry=r)
        docs = {
            "accept_length": ("loadgen_accept_length", "Last finished cell's accept length (best source)."),
            "gpu_power": ("loadgen_gpu_power_watts", "Last finished cell's mean total GPU power."),
            "j_per_token": ("loadgen_energy_per_output_token_joules",
                            "Last finished cell's GPU energy per output token."),
            "tokens_per_j": ("loadgen_output_tokens_per_joule", "Last finished cell's output tokens per joule."),
            "cell_tok_s": ("loadgen_cell_output_tokens_per_second",
                           "Last finished cell's aggregate output tokens/s."),
            "cell_loop_lag_p99": ("loadgen_cell_event_loop_lag_p99_seconds",
                                  "Last finished cell's p99 event-loop lag of the client."),
        }
        self.cell_gauges = {attr: Gauge(name, doc, cell, registry=r) for attr, (name, doc) in docs.items()}

    def _init_run_gauges(self, run: str) -> None:
        self.in_flight.labels(run).set(self._in_flight)
        self.saturated.labels(run).set(0)
        self.loop_lag.labels(run).set(0)

    def _switch_run(self, run: str) -> None:
        """A new run id (the CLI may name the run only once it starts; a sweep runs several): the run-level
        gauges describe the current run, so the old run's are dropped rather than left frozen."""
        for gauge in (self.in_flight, self.saturated, self.loop_lag, self.target_concurrency,
                      self.context_tokens, self.target_rate, self.achieved_rate):
            self._remove(gauge, self.run_id)
        self.run_id = run
        self._init_run_gauges(run)

    # --- Sink hooks ---------------------------------------------------------------------------------

    def cell_started(self, cell: CellKey, run_id: str) -> None:
        if run_id and run_id != self.run_id:
            self._switch_run(run_id)
        self._deactivate()
        series = self._series(self.run_id, cell)
        self._active = series.key
        self.cell_active.labels(*series.key).set(1)
        self.target_concurrency.labels(self.run_id).set(cell.concurrency)
        self.context_tokens.labels(self.run_id).set(cell.context_tokens)
        if cell.request_rate is not None:
            self.target_rate.labels(self.run_id).set(cell.request_rate)
        else:
            self._remove(self.target_rate, self.run_id)

    def request_sent(self, cell: CellKey) -> None:
        self._in_flight += 1
        self.in_flight.labels(self.run_id).set(self._in_flight)

    def record(self, rec: Record) -> None:
        s = self._series(rec.run_id or self.run_id, rec.cell)
        counter = s.requests.get(rec.outcome)
        if counter is None:  # an outcome this version does not know still gets counted
            counter = s.requests[rec.outcome] = self.requests.labels(*s.key, rec.outcome)
        counter.inc()
        if rec.t_sent_ns > 0:
            self._in_flight = max(0, self._in_flight - 1)
            self.in_flight.labels(self.run_id).set(self._in_flight)
            if rec.t_intended_ns > 0:
                s.lateness.observe(max(0, rec.t_sent_ns - rec.t_intended_ns) / 1e9)
            if rec.t_first_token_ns is not None:
                s.ttft.observe((rec.t_first_token_ns - rec.t_sent_ns) / 1e9)
        self._observe_itl(s.key, rec)
        if rec.outcome == "ok":
            self._observe_ok(s, rec)

    def cell_finished(self, cell: CellKey, summary: dict) -> None:
        key = self._key(self.run_id, cell)
        for path, attr in CELL_SUMMARY_GAUGES.items():
            value = summary_value(summary, path)
            if value is not None:
                self.cell_gauges[attr].labels(*key).set(value)
        saturated = summary_value(summary, "client.saturated")
        if saturated is not None:
            self.saturated.labels(self.run_id).set(saturated)
        achieved = achieved_request_rate(summary) if cell.request_rate is not None else None
        if achieved is not None:
            self.achieved_rate.labels(self.run_id).set(achieved)
        if key in self._cells:
            self.cell_active.labels(*key).set(0)
        if self._active == key:
            self._active = None

    def close(self) -> None:
        """The run is over: nothing is in flight and no cell is active (the values stay for the linger)."""
        self._closed = True
        self._deactivate()
        self._in_flight = 0
        self.in_flight.labels(self.run_id).set(0)

    # --- observation helpers ------------------------------------------------------------------------

    def _observe_ok(self, s: _CellSeries, rec: Record) -> None:
        if rec.prompt_tokens is not None:
            s.prompt_tokens.inc(rec.prompt_tokens)
        if rec.completion_tokens is not None:
            s.output_tokens.inc(rec.completion_tokens)
        s.chunks.inc(rec.chunks)
        if rec.t_sent_ns > 0 and rec.t_end_ns >= rec.t_sent_ns:
            s.e2e.observe((rec.t_end_ns - rec.t_sent_ns) / 1e9)
        rate = request_output_rate(rec)
        if rate is not None:
            s.request_rate.observe(rate)

    def _observe_itl(self, key: tuple[str, str, str], rec: Record) -> None:
        """One observation per chunk gap, weighted by the tokens of the chunk that ended the gap.

        A chunk that carried no token (a role or empty delta) passes its gap on to the next one, so the
        time between tokens is never lost. Without per-chunk token counts nothing is observed.
        """
        if not rec.chunk_tokens or not rec.chunk_gaps_ns:
            return
        pending_ns = 0
        for gap_ns, n in zip(rec.chunk_gaps_ns, rec.chunk_tokens[1:]):
            pending_ns += gap_ns
            if n > 0:
                self.itl.observe(key, pending_ns / 1e9, n)
                pending_ns = 0

    # --- series bookkeeping -------------------------------------------------------------------------

    @staticmethod
    def _key(run: str, cell: CellKey) -> tuple[str, str, str]:
        return (run, str(cell.concurrency), str(cell.context_tokens))

    def _series(self, run: str, cell: CellKey) -> _CellSeries:
        key = self._key(run, cell)
        s = self._cells.get(key)
        if s is None:
            # every label set of the cell is created at zero, so rates and ratios exist from the first scrape
            s = self._cells[key] = _CellSeries(
                key=key,
                requests={o: self.requests.labels(*key, o) for o in OUTCOMES},
                prompt_tokens=self.prompt_tokens.labels(*key),
                output_tokens=self.output_tokens.labels(*key),
                chunks=self.chunks.labels(*key),
                ttft=self.ttft.labels(*key),
                e2e=self.e2e.labels(*key),
                request_rate=self.request_rate.labels(*key),
                lateness=self.lateness.labels(*key),
            )
            self.itl.touch(key)
        return s

    def _deactivate(self) -> None:
        if self._active is not None:
            self.cell_active.labels(*self._active).set(0)
            self._active = None

    @staticmethod
    def _remove(metric, *labelvalues) -> None:
        try:
            metric.remove(*labelvalues)
        except KeyError:
            pass

    # --- serving ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve /metrics on the running loop; afterwards `.port` is the bound port."""
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(self.registry))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        info = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(info[4])
        except OSError:
            sock.close()
            await self._runner.cleanup()
            self._runner = None
            raise
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self._lag_task = asyncio.create_task(self._sample_loop_lag())

    async def aclose(self) -> None:
        """End the run (if `close()` was not called), keep serving `linger_s` seconds, then stop."""
        if not self._closed:
            self.close()
        if self._runner is None:
            return
        await asyncio.sleep(self.linger_s)
        if self._lag_task is not None:
            self._lag_task.cancel()
            try:
                await self._lag_task
            except asyncio.CancelledError:
                pass
            self._lag_task = None
        await self._runner.cleanup()
        self._runner = None

    async def _sample_loop_lag(self) -> None:
        """Lag = how late a `LAG_SAMPLE_S` sleep wakes up: the time callbacks waited for the loop."""
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(LAG_SAMPLE_S)
            self._lags.append(max(0.0, loop.time() - t0 - LAG_SAMPLE_S))
            self.loop_lag.labels(self.run_id).set(max(self._lags))


def request_output_rate(rec: Record) -> float | None:
    """Per-request decode rate in tokens/s: (completion_tokens - 1) / (t_last_token - t_first_token).

    The first token is excluded (it belongs to TTFT). None when there is no second token or no time span.
    """
    if rec.completion_tokens is None or rec.completion_tokens < 2 or rec.t_first_token_ns is None:
        return None
    t_last = rec.t_last_token_ns if rec.t_last_token_ns is not None else rec.t_end_ns
    span_ns = t_last - rec.t_first_token_ns
    if span_ns <= 0:
        return None
    return (rec.completion_tokens - 1) / (span_ns / 1e9)


def achieved_request_rate(summary: dict) -> float | None:
    """Requests ended (ok + failed) per second of the cell's measured window, or the summary's own figure."""
    own = summary_value(summary, "achieved_request_rate")
    if own is not None:
        return own
    duration = summary_value(summary, "duration_s")
    ok = summary_value(summary, "requests.ok")
    failed = summary_value(summary, "requests.failed")
    if not duration or ok is None:
        return None
    return (ok + (failed or 0.0)) / duration
