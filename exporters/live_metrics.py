"""The live exporter's metric families (names, help, buckets, labels: docs/metrics.md) and their label children.

`LiveMetrics` creates every family in the registry it is given and hands out the children of one cell,
created at zero on first use, so rates and ratios exist from the first scrape.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from exporters.cell_results import CELL_RESULTS
from exporters.token_histogram import TokenWeightedHistogram
from loadgen.record import OUTCOMES, CellKey

# Buckets are dense where docs/observability.md's alerts and SLOs sit: TTFT 0.5-2 s, ITL 2-100 ms.
TTFT_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                  1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
ITL_BUCKETS_S = (0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.0125, 0.015,
                 0.0175, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.125, 0.15,
                 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
E2E_BUCKETS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0,
                 60.0, 90.0, 120.0, 180.0, 300.0, 600.0)
# up to 20,000 tok/s: the simulator at --speed 8 and a B300 with a long accept length both exceed 2,000
REQUEST_RATE_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 75.0, 100.0, 125.0,
                        150.0, 200.0, 250.0, 300.0, 400.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0,
                        5000.0, 7500.0, 10000.0, 15000.0, 20000.0)
LATENESS_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                      5.0)

# request_rate is "" for closed-loop cells (Prometheus drops empty labels) and the rate for open-loop ones, so
# two open-loop cells of one prompt length never share a series
CELL_LABELS = ("run", "concurrency", "context_tokens", "request_rate")
# the run's identity on loadgen_run_info: label, target and speculative settings (server_info keys)
RUN_INFO_LABELS = ("run", "label", "model", "engine", "fingerprint", "spec_algorithm", "spec_budget", "spec_topk",
                   "spec_draft_tokens", "spec_steps", "spec_block_size")
SPEC_INFO_KEYS = {"spec_algorithm": "speculative_algorithm", "spec_budget": "speculative_ddtree_budget",
                  "spec_topk": "speculative_eagle_topk", "spec_draft_tokens": "speculative_num_draft_tokens",
                  "spec_steps": "speculative_num_steps", "spec_block_size": "speculative_dflash_block_size"}


@dataclass
class CellSeries:
    """The label children of one cell, looked up once per cell instead of once per record."""

    key: tuple[str, str, str, str]
    requests: dict
    prompt_tokens: Counter
    output_tokens: Counter
    chunks: Counter
    ttft: Histogram
    e2e: Histogram
    request_rate: Histogram
    lateness: Histogram


class LiveMetrics:
    """Every family of the live exporter, in one registry."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self._cells: dict[tuple[str, str, str, str], CellSeries] = {}
        self._per_request(registry)
        self._per_run(registry)
        self.cell_gauges = {attr: Gauge(name, doc, CELL_LABELS, registry=registry)
                            for attr, (_path, name, doc) in CELL_RESULTS.items()}
        self.cell_bottleneck = Gauge("loadgen_cell_bottleneck", "Finished cell: 1 for the cell's bottleneck verdict "
                                     "(label bottleneck: client, server_host, gpu_power_cap, gpu_thermal, "
                                     "gpu_memory_bandwidth, gpu_compute or unknown).", (*CELL_LABELS, "bottleneck"),
                                     registry=registry)

    def _per_request(self, r: CollectorRegistry) -> None:
        cell = CELL_LABELS
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

    def _per_run(self, r: CollectorRegistry) -> None:
        run = ("run",)
        self.in_flight = Gauge("loadgen_in_flight_requests", "Requests sent and not yet ended.", run, registry=r)
        self.target_concurrency = Gauge("loadgen_target_concurrency", "Current cell's concurrency "
                                        "(open loop: its cap, 0 = none).", run, registry=r)
        self.context_tokens = Gauge("loadgen_context_tokens", "Current cell's prompt length in tokens.", run,
                                    registry=r)
        self.cell_active = Gauge("loadgen_cell_active", "1 while the cell runs, 0 once it has ended.", CELL_LABELS,
                                 registry=r)
        self.loop_lag = Gauge("loadgen_event_loop_lag_seconds", "Largest event-loop lag of the client over the "
                              "last second.", run, registry=r)
        self.saturated = Gauge("loadgen_client_saturated", "1 when the last finished cell's client was saturated "
                               "(its results are invalid).", run, registry=r)
        self.target_rate = Gauge("loadgen_target_requests_per_second", "Open loop: the cell's target request "
                                 "rate.", run, registry=r)
        self.achieved_rate = Gauge("loadgen_achieved_requests_per_second", "Open loop: the last finished cell's "
                                   "achieved request rate.", run, registry=r)
        self.run_active = Gauge("loadgen_run_active", "1 while the run measures, 0 once it has ended (the "
                                "exporter lingers).", run, registry=r)
        self.run_info = Gauge("loadgen_run_info", "The run's label, target and speculative settings (always 1).",
                              RUN_INFO_LABELS, registry=r)
        self.power_limit = Gauge("loadgen_gpu_power_limit_watts", "Power limit per GPU known to loadgen, by "
                                 "source (flag = --gpu-power-limit, nvml, dcgm).", run + ("source",), registry=r)
        self.cell_start = Gauge("loadgen_cell_start_timestamp_seconds", "Unix time the cell's load began.",
                                CELL_LABELS, registry=r)
        self.cell_end = Gauge("loadgen_cell_end_timestamp_seconds", "Unix time the cell's summary was final.",
                              CELL_LABELS, registry=r)

    def run_gauges(self) -> tuple[Gauge, ...]:
        """The families labelled by run only: they describe the current run."""
        return (self.in_flight, self.saturated, self.loop_lag, self.target_concurrency, self.context_tokens,
                self.target_rate, self.achieved_rate, self.run_active)

    @staticmethod
    def key(run: str, cell: CellKey) -> tuple[str, str, str, str]:
        rate = "" if cell.request_rate is None else f"{cell.request_rate:g}"
        return (run, str(cell.concurrency), str(cell.context_tokens), rate)

    def series(self, run: str, cell: CellKey) -> CellSeries:
        """The cell's children; on first use every label set of the cell is created at zero."""
        key = self.key(run, cell)
        s = self._cells.get(key)
        if s is None:
            s = self._cells[key] = CellSeries(
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

    def known(self, key: tuple[str, str, str, str]) -> bool:
        return key in self._cells

    @staticmethod
    def remove(metric, *labelvalues) -> None:
        """Drop a child if it exists."""
        try:
            metric.remove(*labelvalues)
        except KeyError:
            pass
