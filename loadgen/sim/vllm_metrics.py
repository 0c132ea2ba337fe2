"""`loadgen sim --engine vllm`: the simulator with vLLM's metric names and routes.

vLLM (v1 engine, `vllm/v1/spec_decode/metrics.py`) keeps cumulative speculative-decoding counters that move at
every engine step, not at request completion:

    vllm:spec_decode_num_drafts_total          verify steps (one draft per running request per step)
    vllm:spec_decode_num_draft_tokens_total    draft tokens proposed = drafts · num_speculative_tokens
    vllm:spec_decode_num_accepted_tokens_total draft tokens accepted (the bonus token is not counted)

so mean acceptance length over a window = 1 + Δaccepted / Δdrafts, acceptance rate = Δaccepted / Δdraft_tokens.
Here a verify step that commits k tokens accepted k − 1 drafts, and num_speculative_tokens is the budget.
A vLLM server answers `/version` and has no `/server_info`, and returns no per-request SGLang spec details.
"""

from __future__ import annotations

from aiohttp import web

from loadgen.sim.engine import Engine

VERSION = "0.11.0-sim"


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


def render_vllm_metrics(engine: Engine, counters: VllmCounters, model: str) -> str:
    """vLLM's exposition: counters declared without `_total` in TYPE, sampled with it (prometheus_client)."""
    labels = f'model_name="{model}",engine="0"'
    fams = [
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
         len(engine.running)),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", len(engine.waiting)),
        ("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", engine.prompt_tokens_total),
        ("vllm:generation_tokens", "counter", "Number of generation tokens processed.", counters.generation_tokens),
        ("vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.", counters.drafts),
        ("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.", counters.draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.", counters.accepted_tokens),
    ]
    lines: list[str] = []
    for name, kind, help_text, value in fams:
        sample = name + "_total" if kind == "counter" else name
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{sample}{{{labels}}} {float(value)}"]
    lines += ["# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
              "# TYPE vllm:time_to_first_token_seconds histogram"]
    lines += engine.ttft_hist.lines("vllm:time_to_first_token_seconds", labels)
    return "\n".join(lines) + "\n"


def add_vllm_routes(router: web.UrlDispatcher) -> None:
    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    router.add_get("/version", version)
