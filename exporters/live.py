"""Live Prometheus metrics of a run (`loadgen --metrics-port`): a Sink that serves what it has seen.

Names, labels and meanings are listed in docs/metrics.md. Each finished request is observed once, when
`record()` hands it over (TTFT, E2E, per-request rate, send lateness), and its chunk gaps once each (ITL);
nothing here runs on the client's per-chunk path. Every figure comes from `loadgen.metrics` (the per-request
ones from `loadgen.metrics.request`, the cell's from its result), so the dashboard and the results file
agree. The exporter owns its registry, so two runs in one process (tests, sweeps) never share series, and
`_created` series are switched off because Prometheus 2.x ingests them as ordinary series.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time

import prometheus_client
from prometheus_client import CollectorRegistry

from exporters.cell_results import CELL_RESULTS, per_gpu_limit_w, summary_value
from exporters.live_metrics import CELL_LABELS, CellSeries, LiveMetrics
from exporters.metrics_server import MetricsServer
from exporters.run_info import run_info_labels
from exporters.search_metrics import SearchGauges
from exporters.slo import CellLabels, SloMetrics
from exporters.token_histogram import TokenWeightedHistogram
from exporters.tune_metrics import TuneGauges
from exporters.verify_metrics import VerifyGauges
from loadgen.aio import cancel_and_wait
from loadgen.config import SloConfig
from loadgen.metrics.open_loop import achieved_request_rate_of
from loadgen.metrics.request import e2e_s, itl_pairs, request_tok_s, send_lateness_s, ttft_s
from loadgen.metrics.request import request_tok_s as request_output_rate  # the name callers import
from loadgen.names import Outcome, Phase
from loadgen.record import CellKey, Record
from loadgen.results.cell_result import CellResult
from loadgen.run.monitor import watch_loop_lag

__all__ = ["LAG_SAMPLE_S", "LiveExporter", "TokenWeightedHistogram", "request_output_rate"]
LAG_SAMPLE_S = 0.1
LAG_WINDOW = 10  # samples: the lag gauge is the largest lag of the last second


class LiveExporter(LiveMetrics):
    """Sink serving the run's live metrics on http://host:port/metrics from the running event loop.

    `await start()` binds (port 0 = a free one; `.port` tells which), the Sink hooks update the metrics,
    `await aclose()` keeps serving `linger_s` more seconds (so the last values get scraped: two scrape
    intervals by default) and stops.
    """

    def __init__(self, run_id: str, host: str = "127.0.0.1", port: int = 0, linger_s: float = 10.0,
                 registry: CollectorRegistry | None = None, label: str | None = None,
                 gpu_power_limit_w: float | None = None, slo: SloConfig | None = None):
        prometheus_client.disable_created_metrics()
        super().__init__(registry if registry is not None else CollectorRegistry(auto_describe=True))
        self.run_id = run_id
        self.host = host
        self.port = port
        self.linger_s = linger_s
        self._active: CellLabels | None = None
        self._in_flight = 0
        self._lags: collections.deque[float] = collections.deque(maxlen=LAG_WINDOW)
        self._server: MetricsServer | None = None
        self._lag_task: asyncio.Task | None = None
        self._closed = False
        self.label = label or ""
        self.gpu_power_limit_w = gpu_power_limit_w
        self._bottlenecks: dict[tuple, str] = {}
        self._target: dict = {}
        self._info: tuple[str, ...] | None = None
        self._limit_source: str | None = None
        self._cell_run: str | None = None  # the run id of the cell being measured (`measured_again`)
        self.verify = VerifyGauges(self.registry, CELL_LABELS)
        self.slo = SloMetrics(self.registry, slo or SloConfig(), CELL_LABELS)  # families served even without --slo
        self.search = SearchGauges(self.registry)  # `loadgen search` feeds it (SearchPlan.watch)
        self.tune = TuneGauges(self.registry)  # `loadgen tune` feeds it (VisitPlan.watch)
        self._init_run_gauges(run_id)

    def _init_run_gauges(self, run: str) -> None:
        self.in_flight.labels(run).set(self._in_flight)
        self.saturated.labels(run).set(0)
        self.loop_lag.labels(run).set(0)
        self.run_active.labels(run).set(1)
        self._set_run_info()
        if self.gpu_power_limit_w is not None:
            self._set_power_limit(self.gpu_power_limit_w, "flag")

    def describe_target(self, target: dict) -> None:
        """The target is known (`Target.as_dict()`): its model, engine and speculative settings go on
        loadgen_run_info."""
        self._target = target
        self._set_run_info()

    def _set_run_info(self) -> None:
        if self._info is not None:
            self.remove(self.run_info, *self._info)
        self._info = run_info_labels(self.run_id, self.label, self._target)
        self.run_info.labels(*self._info).set(1)

    def _set_power_limit(self, watts: float, source: str) -> None:
        if self._limit_source is not None and self._limit_source != source:
            self.remove(self.power_limit, self.run_id, self._limit_source)
        self._limit_source = source
        self.power_limit.labels(self.run_id, source).set(watts)

    def _switch_run(self, run: str) -> None:
        """A new run id (the CLI may name the run only once it starts; a sweep runs several): the run-level
        gauges describe the current run, so the old run's are dropped rather than left frozen."""
        for gauge in self.run_gauges():
            self.remove(gauge, self.run_id)
        if self._limit_source is not None:
            self.remove(self.power_limit, self.run_id, self._limit_source)
            self._limit_source = None
        self.run_id = run
        self._init_run_gauges(run)

    # --- Sink hooks ---------------------------------------------------------------------------------

    def measured_again(self, run_id: str) -> bool:
        """`<run>-<tag>`: a cell of this run measured once more (`run/remeasure.py`, the drift check's control).
        It is part of the run: no run switch, one loadgen_run_info; its cell series carry its own run id, so
        its figures stand beside the first measurement's rather than in them."""
        return run_id.startswith(f"{self.run_id}-")

    def run_started(self, run_id: str, cells: int | None) -> None:
        pass

    def repeat_finished(self, cell: CellKey, result: CellResult, repeat: int) -> None:
        pass

    def cell_started(self, cell: CellKey, run_id: str) -> None:
        if run_id and run_id != self.run_id and not self.measured_again(run_id):
            self._switch_run(run_id)
        self._deactivate()
        self._cell_run = run_id or self.run_id
        series = self.series(self._cell_run, cell)
        self._active = series.key
        self.cell_active.labels(*series.key).set(1)
        self.cell_start.labels(*series.key).set(time.time())
        self.slo.cell_started(series.key)
        self.target_concurrency.labels(self.run_id).set(cell.concurrency)
        self.context_tokens.labels(self.run_id).set(cell.context_tokens)
        if cell.request_rate is not None:
            self.target_rate.labels(self.run_id).set(cell.request_rate)
        else:
            self.remove(self.target_rate, self.run_id)

    def request_sent(self, cell: CellKey) -> None:
        self._in_flight += 1
        self.in_flight.labels(self.run_id).set(self._in_flight)

    def record(self, rec: Record) -> None:
        s = self.series(rec.run_id or self.run_id, rec.cell)
        counter = s.requests.get(rec.outcome)
        if counter is None:  # an outcome this version does not know still gets counted
            counter = s.requests[rec.outcome] = self.requests.labels(*s.key, rec.outcome)
        counter.inc()
        if rec.t_sent_ns > 0:
            self._in_flight = max(0, self._in_flight - 1)
            self.in_flight.labels(self.run_id).set(self._in_flight)
            if rec.phase == Phase.VERIFY:  # shares the load, in no latency figure
                self.verify.observe(s.key, rec)
                return
            self._observe_sent(s, rec)
        self._observe_itl(s.key, rec)
        if rec.outcome == Outcome.OK:
            self._observe_ok(s, rec)
        self.slo.record(s.key, rec)

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        """The finished cell's gauges, from its result."""
        key = self.key(self._cell_run or self.run_id, cell)
        for attr, (path, _name, _doc) in CELL_RESULTS.items():
            value = summary_value(result, path)
            if value is not None:
                self.cell_gauges[attr].labels(*key).set(value)
        self.cell_end.labels(*key).set(time.time())
        self._set_bottleneck(key, result.gpu.bottleneck)
        self.slo.cell_finished(key, result)
        limit = per_gpu_limit_w(result)
        if limit is not None and self.gpu_power_limit_w is None:
            self._set_power_limit(*limit)
        saturated = summary_value(result, "client.saturated")
        if saturated is not None:
            self.saturated.labels(self.run_id).set(saturated)
        achieved = (achieved_request_rate_of(result.load.achieved_request_rate, result.requests.requests,
                                             result.load.duration_s) if cell.request_rate is not None else None)
        if achieved is not None and math.isfinite(achieved):
            self.achieved_rate.labels(self.run_id).set(achieved)
        if self.known(key):
            self.cell_active.labels(*key).set(0)
        if self._active == key:
            self._active = None

    def _set_bottleneck(self, key: tuple, verdict: str | None) -> None:
        """One series per cell: a cell measured again drops its earlier verdict."""
        earlier = self._bottlenecks.pop(key, None)
        if earlier is not None:
            self.remove(self.cell_bottleneck, *key, earlier)
        if verdict:
            self.cell_bottleneck.labels(*key, verdict).set(1)
            self._bottlenecks[key] = verdict

    def close(self) -> None:
        """The run is over: nothing is in flight and no cell is active (the values stay for the linger)."""
        self._closed = True
        self._deactivate()
        self.run_active.labels(self.run_id).set(0)
        self._in_flight = 0
        self.in_flight.labels(self.run_id).set(0)

    # --- observation helpers: every figure from loadgen.metrics.request -----------------------------

    @staticmethod
    def _observe_sent(s: CellSeries, rec: Record) -> None:
        """Any outcome: send lateness, and TTFT when a first token came (a stream that later failed still
        measured it)."""
        lateness = send_lateness_s(rec)
        if lateness is not None:
            s.lateness.observe(lateness)
        ttft = ttft_s(rec)
        if ttft is not None:
            s.ttft.observe(ttft)

    @staticmethod
    def _observe_ok(s: CellSeries, rec: Record) -> None:
        if rec.prompt_tokens is not None:
            s.prompt_tokens.inc(rec.prompt_tokens)
        if rec.completion_tokens is not None:
            s.output_tokens.inc(rec.completion_tokens)
        s.chunks.inc(rec.chunks)
        if rec.t_sent_ns > 0 and rec.t_end_ns >= rec.t_sent_ns:
            s.e2e.observe(e2e_s(rec))
        rate = request_tok_s(rec)
        if rate is not None:
            s.request_rate.observe(rate)

    def _observe_itl(self, key: CellLabels, rec: Record) -> None:
        """The record's per-token ITL pairs (`itl_pairs`), each observed once with its token weight.

        Only measured pairs: a record without per-chunk token counts adds nothing (its pairs would be an
        estimate, and a histogram cannot tell an estimate apart later)."""
        for per_token_s, n in zip(*itl_pairs(rec, estimate=False)):
            self.itl.observe(key, per_token_s, n)

    def _deactivate(self) -> None:
        if self._active is not None:
            self.cell_active.labels(*self._active).set(0)
            self._active = None

    # --- serving ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve /metrics on the running loop; afterwards `.port` is the bound port."""
        server = MetricsServer(self.registry, self.host, self.port)
        self.port = await server.start()
        self._server = server
        self._lag_task = asyncio.create_task(watch_loop_lag(LAG_SAMPLE_S, self._on_lag))

    async def aclose(self) -> None:
        """End the run (if `close()` was not called), keep serving `linger_s` seconds, then stop."""
        if not self._closed:
            self.close()
        if self._server is None:
            return
        await asyncio.sleep(self.linger_s)
        await cancel_and_wait(self._lag_task)
        self._lag_task = None
        await self._server.stop()
        self._server = None

    def _on_lag(self, lag_s: float) -> None:
        """The gauge shows the largest of the last `LAG_WINDOW` samples (one second)."""
        self._lags.append(lag_s)
        self.loop_lag.labels(self.run_id).set(max(self._lags))
