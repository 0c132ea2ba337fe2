"""What the simulator's HTTP face serves as, beside the engine's own settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimConfig:
    model: str = "Kimi-K2.6-sim"
    context_length: int = 32768  # prompt + output tokens a request may hold
    api_key: str | None = None  # required as 'Authorization: Bearer KEY' on /v1/* and /generate when set
    engine_name: str = "sglang"  # "sglang" or "vllm": metric names and info routes
