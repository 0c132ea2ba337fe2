"""The simulator's `/metrics`, written by prometheus_client from the simulator's state at scrape time.

Each engine's names live beside it (`sglang_metrics`, `vllm_metrics`); both are custom collectors that read
the engine when Prometheus scrapes, so a scrape shows the counters as they are at that instant, and one
registry per simulator keeps two simulators in one process apart. The text is format 0.0.4
(`generate_latest`): a counter family `x` is written `# TYPE x_total counter` with its sample `x_total`, as
SGLang and vLLM (both prometheus_client) write theirs. The families carry no creation time, so no
`_created` series appear.
"""

from __future__ import annotations

import bisect
from itertools import accumulate

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                  400.0)
TTFT_HELP = "Histogram of time to first token in seconds."


class TtftHistogram:
    """Time to first token (s) of streamed requests; a value v counts in every bucket with v ≤ le."""

    def __init__(self, buckets_s: tuple[float, ...] = TTFT_BUCKETS_S):
        self.buckets_s = buckets_s
        self.counts = [0] * (len(buckets_s) + 1)  # the last one is above every bound (le="+Inf" only)
        self.sum_s = 0.0
        self.count = 0

    def observe(self, ttft_s: float) -> None:
        self.counts[bisect.bisect_left(self.buckets_s, ttft_s)] += 1
        self.sum_s += ttft_s
        self.count += 1

    def family(self, name: str, labels: dict[str, str]) -> HistogramMetricFamily:
        """The histogram as `name`_bucket (cumulative), `name`_count and `name`_sum with `labels`."""
        fam = HistogramMetricFamily(name, TTFT_HELP, labels=list(labels))
        cumulative = accumulate(self.counts[:-1])
        buckets = [(floatToGoString(le), n) for le, n in zip(self.buckets_s, cumulative)]
        fam.add_metric(list(labels.values()), [*buckets, ("+Inf", self.count)], self.sum_s)
        return fam


def gauge(name: str, help_text: str, labels: dict[str, str], value: float) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(name, help_text, labels=list(labels))
    fam.add_metric(list(labels.values()), float(value))
    return fam


def counter(name: str, help_text: str, labels: dict[str, str], value: float) -> CounterMetricFamily:
    """A counter family `name` (without `_total`; the exposition appends it)."""
    fam = CounterMetricFamily(name, help_text, labels=list(labels))
    fam.add_metric(list(labels.values()), float(value))
    return fam


class MetricsEndpoint:
    """GET /metrics over `collector`, in a registry of its own (`registry.get_sample_value` reads it)."""

    def __init__(self, collector: Collector):
        self.registry = CollectorRegistry()
        self.registry.register(collector)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(body=self.exposition(), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
