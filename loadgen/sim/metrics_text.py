"""The simulator's `/metrics`: SGLang's metric names and labels (see shared/samples/sglang-metrics.txt)."""

from __future__ import annotations

import bisect

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)


class BucketHistogram:
    def __init__(self, buckets=TTFT_BUCKETS):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, v)] += 1
        self.sum += v
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, cum = [], 0
        for le, c in zip(self.buckets, self.counts):
            cum += c
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {cum}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


def render_metrics(engine, model: str, engine_name: str = "sglang") -> str:
    sched = f'model_name="{model}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    tok = f'model_name="{model}",engine_type="unified"'
    stream = tok + ',is_streaming="true"'
    gauges = {
        "num_running_reqs": len(engine.running),
        "num_queue_reqs": len(engine.waiting),
        "gen_throughput": engine.gauge_gen_throughput,
        "spec_accept_length": engine.gauge_accept_length,
        "spec_num_draft_tokens": engine.spec.budget + 1,
        "max_total_num_tokens": 400000,
        "context_len": 32768,
    }
    lines: list[str] = []
    for name, value in gauges.items():
        lines += [f"# HELP sglang:{name} {name}", f"# TYPE sglang:{name} gauge", f"sglang:{name}{{{sched}}} {float(value)}"]
    counters = {
        "prompt_tokens_total": (stream, engine.prompt_tokens_total),
        "generation_tokens_total": (stream, engine.generation_tokens_total),
        "num_requests_total": (stream, engine.num_requests_total),
        "spec_verify_calls_total": (tok, engine.spec_verify_calls_total),
    }
    for name, (labels, value) in counters.items():
        base = name[: -len("_total")]
        lines += [f"# HELP sglang:{base} {base}", f"# TYPE sglang:{base} counter",
                  f"sglang:{name}{{{labels}}} {float(value)}"]
    lines += ["# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.",
              "# TYPE sglang:time_to_first_token_seconds histogram"]
    lines += engine.ttft_hist.lines("sglang:time_to_first_token_seconds", stream)
    return "\n".join(lines) + "\n"
