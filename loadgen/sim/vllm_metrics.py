"""`loadgen sim --engine vllm`: vLLM's `/metrics` names, read from the `Engine` and step-level counters.

vLLM (v1 engine, `vllm/v1/spec_decode/metrics.py`) keeps cumulative speculative-decoding counters that move at
every engine step, not at request completion:

    vllm:spec_decode_num_drafts_total          verify steps (one draft per running request per step)
    vllm:spec_decode_num_draft_tokens_total    draft tokens proposed = drafts · num_speculative_tokens
    vllm:spec_decode_num_accepted_tokens_total draft tokens accepted (the bonus token is not counted)

    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}  drafts whose token at position i
                                                                      (from 0) was accepted

so mean acceptance length over a window = 1 + Δaccepted / Δdrafts, acceptance rate = Δaccepted / Δdraft_tokens,
and the acceptance rate at draft position i = Δper_pos[i] / Δdrafts.
Here a verify step that commits k tokens accepted k − 1 drafts, and num_speculative_tokens is the budget.
Every series carries `model_name, engine`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from loadgen.sim.engine import Engine
from loadgen.sim.metrics import TtftHistogram, counter, gauge


class VllmCounters:
    """vLLM's step-level counters, fed by the engine after every step."""

    def __init__(self, engine: Engine):
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self.generation_tokens = 0
        engine.step_listeners.append(self._on_step)

    def _on_step(self, engine: Engine, batch: int, committed: int, verify_reqs: int) -> None:
        self.drafts += verify_reqs
        self.draft_tokens += verify_reqs * engine.spec.budget
        self.accepted_tokens += committed - verify_reqs
        self.generation_tokens += committed + (batch - verify_reqs)  # prefills commit one token each


class VllmCollector:
    """Yields vLLM's metric families from `engine`, its step counters and the TTFT histogram at each scrape."""

    def __init__(self, engine: Engine, model: str, ttft: TtftHistogram):
        self.engine = engine
        self.model = model
        self.ttft = ttft
        self.counters = VllmCounters(engine)

    def collect(self) -> Iterator[Metric]:
        labels = {"model_name": self.model, "engine": "0"}
        e, c = self.engine, self.counters
        yield gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                    len(e.running))
        yield gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                    len(e.waiting))
        for name, help_text, value in (
            ("prompt_tokens", "Number of prefill tokens processed.", e.prompt_tokens_total),
            ("generation_tokens", "Number of generation tokens processed.", c.generation_tokens),
            ("spec_decode_num_drafts", "Number of spec decoding drafts.", c.drafts),
            ("spec_decode_num_draft_tokens", "Number of draft tokens.", c.draft_tokens),
            ("spec_decode_num_accepted_tokens", "Number of accepted tokens.", c.accepted_tokens),
        ):
            yield counter(f"vllm:{name}", help_text, labels, value)
        per_pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos",
                                      "Accepted tokens per draft position.", labels=[*labels, "position"])
        for i, n in enumerate(e.accepted_at_position(e.spec.budget)):
            per_pos.add_metric([*labels.values(), str(i)], n)
        yield per_pos
        yield self.ttft.family("vllm:time_to_first_token_seconds", labels)
