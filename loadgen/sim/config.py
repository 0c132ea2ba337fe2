"""What the simulator's HTTP face serves as, beside the engine's own settings."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.names import Engine

# One default for `loadgen sim` and the built-in simulator of a run (`--sim-*`), so both give the same tok/s
# for the same cell. Speed 4 (every modelled step 4× faster) keeps the default matrix to about a minute;
# --speed 1 gives the calibrated deployment's own figures (DESIGN.md §8).
DEFAULT_SPEED = 4.0
DEFAULT_BUDGET = 8
DEFAULT_TOPK = 4


@dataclass
class SimConfig:
    model: str = "Kimi-K2.6-sim"
    context_length: int = 32768  # prompt + output tokens a request may hold
    api_key: str | None = None  # required as 'Authorization: Bearer KEY' on /v1/* and /generate when set
    engine_name: Engine = Engine.SGLANG  # the engine imitated: metric names, info routes, stream shape
    log_file: str | None = None  # --log-file: the llama.cpp imitation writes its per-request lines there
    per_token_events: bool = False  # one SSE event per token, a step's events back to back (sim/per_token.py)
    reasoning_tokens: int = 0  # a chat answer's first tokens streamed as reasoning_content (--reasoning-tokens)
    cache_report: bool = False  # a prefix cache whose served tokens each answer reports (sim/prefix_cache.py)
    disable_cuda_graph: bool = False  # only reported in /server_info (SGLang's server arg); changes no timing
