"""SGLang's `/metrics` names and labels (see shared/samples/sglang-metrics.txt), read from the `Engine`.

Scheduler gauges carry `model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`; the tokenizer-side counters
carry `model_name, engine_type` and, except `spec_verify_calls`, `is_streaming`. The counters move when a
request completes (see `Engine._emit`), so mean accept length over a window is
Δsglang:generation_tokens_total / Δsglang:spec_verify_calls_total.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from loadgen.sim.engine import Engine
from loadgen.sim.metrics import TtftHistogram, counter, gauge

MAX_TOTAL_NUM_TOKENS = 400000
CONTEXT_LEN = 32768


class SglangCollector:
    """Yields SGLang's metric families from `engine` and the TTFT histogram at each scrape."""

    def __init__(self, engine: Engine, model: str, ttft: TtftHistogram, latency=None):
        self.engine = engine
        self.model = model
        self.ttft = ttft
        self.latency = latency  # ServerLatency, or None

    def collect(self) -> Iterator[Metric]:
        tokenizer = {"model_name": self.model, "engine_type": "unified"}
        scheduler = {**tokenizer, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        streaming = {**tokenizer, "is_streaming": "true"}
        for name, help_text, value in self._gauges():
            yield gauge(f"sglang:{name}", help_text, scheduler, value)
        for name, help_text, labels, value in self._counters(tokenizer, streaming):
            yield counter(f"sglang:{name}", help_text, labels, value)
        yield self.ttft.family("sglang:time_to_first_token_seconds", streaming)
        if self.latency is not None:
            yield from self.latency.families(streaming)

    def _gauges(self) -> list[tuple[str, str, float]]:
        e = self.engine
        return [
            ("num_running_reqs", "The number of running requests.", len(e.running)),
            ("num_queue_reqs", "The number of requests in the waiting queue.", len(e.waiting)),
            ("gen_throughput", "The generation throughput (token/s).", e.gauge_gen_throughput),
            ("spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + bonus "
                                   "token per forward).", e.gauge_accept_length),
            ("spec_num_draft_tokens", "Currently active speculative_num_draft_tokens (decouples from steps "
                                      "under topk>1).", e.spec.budget + 1),
            ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", MAX_TOTAL_NUM_TOKENS),
            ("token_usage", "The token usage of the KV cache (0-1).", min(1.0, sum((r.prompt_tokens or 0) + r.generated for r in e.running) / MAX_TOTAL_NUM_TOKENS)),
            ("cache_hit_rate", "The prefix cache hit rate (0-1).", 0.0),  # no prefix cache simulated
            ("context_len", "The context length of the model.", CONTEXT_LEN),
        ]

    def _counters(self, tokenizer: dict, streaming: dict) -> list[tuple[str, str, dict, float]]:
        e = self.engine
        return [
            ("prompt_tokens", "Number of prefill tokens processed.", streaming, e.prompt_tokens_total),
            ("generation_tokens", "Number of generation tokens processed.", streaming, e.generation_tokens_total),
            ("num_requests", "Number of requests processed.", streaming, e.num_requests_total),
            ("spec_verify_calls", "Number of speculative decoding verification calls.", tokenizer,
             e.spec_verify_calls_total),
            ("num_aborted_requests", "Number of requests aborted.", tokenizer, e.num_aborted_requests_total),
        ]
