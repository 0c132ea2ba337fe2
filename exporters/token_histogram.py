"""A Prometheus histogram whose observations carry a weight: per-token ITL, where one chunk stands for n tokens."""

from __future__ import annotations

import bisect
import threading

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString


class TokenWeightedHistogram:
    """A classic histogram where one observation stands for `n` tokens.

    `observe(labels, per_token_s, n)` adds `n` to the bucket of `per_token_s` and `per_token_s · n` (the
    chunk's gap) to `_sum`, as SGLang's `observe_inter_token_latency` does; so `_count` counts tokens and
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

    def observe(self, labelvalues: tuple[str, ...], per_token_s: float, n: int) -> None:
        idx = bisect.bisect_left(self.bounds, per_token_s)
        with self._lock:
            counts, total = self._state(labelvalues)
            counts[idx] += n
            total[0] += per_token_s * n

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
