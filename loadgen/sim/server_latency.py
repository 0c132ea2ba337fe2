"""The simulated server's own request histograms beside TTFT: queue time, inter-token latency and end-to-end
latency, with SGLang's names and bucket bounds (see shared/reference/sglang.md), observed when a request ends
from its truth row (so they agree with what the simulator knows it did)."""

from __future__ import annotations

from prometheus_client.metrics_core import HistogramMetricFamily

from loadgen.sim.metrics import TtftHistogram

ITL_BUCKETS_S = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
                 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                 400.0, 800.0, 1200.0, 1800.0, 2400.0)
QUEUE_BUCKETS_S = (0.0, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                   1200.0, 3000.0)


class ServerLatency:
    """`observe_end(truth_row, t_admitted_ns)` once per finished request; `families(labels)` at a scrape."""

    def __init__(self):
        self.ttft = TtftHistogram()
        self.itl = TtftHistogram(ITL_BUCKETS_S)
        self.e2e = TtftHistogram(E2E_BUCKETS_S)
        self.queue = TtftHistogram(QUEUE_BUCKETS_S)

    def observe_end(self, truth: dict, t_admitted_ns: int | None) -> None:
        times, tokens = truth.get("chunk_times_ns") or [], truth.get("chunk_tokens") or []
        arrival, end = truth.get("t_arrival_ns"), truth.get("t_end_ns")
        if arrival is None or end is None:
            return
        self.e2e.observe((end - arrival) / 1e9)
        if t_admitted_ns is not None:
            self.queue.observe(max(0, t_admitted_ns - arrival) / 1e9)
        for prev, now, k in zip(times, times[1:], tokens[1:]):
            for _ in range(k):  # SGLang observes a chunk's gap once per token it carried, spread over them
                self.itl.observe((now - prev) / 1e9 / k)

    def families(self, labels: dict[str, str]) -> list[HistogramMetricFamily]:
        out = [self.queue.family("sglang:queue_time_seconds", labels),
               self.itl.family("sglang:inter_token_latency_seconds", labels),
               self.e2e.family("sglang:e2e_request_latency_seconds", labels)]
        for fam, text in zip(out, ("Histogram of queueing time in seconds.",
                                   "Histogram of inter-token latency in seconds.",
                                   "Histogram of end-to-end request latency in seconds")):
            fam.documentation = text
        return out
