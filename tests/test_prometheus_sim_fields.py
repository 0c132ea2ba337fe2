"""The simulator serves what the GPU and server panels read: DCGM profiling, throttling and XID fields that
follow the load, and SGLang's KV-cache, queue-time, ITL and E2E metrics that agree with its own truth rows."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from loadgen.sim.gpus import SimulatedGpus
from loadgen.telemetry.promtext import parse_text

S = 1_000_000_000


def _values(text: str, name: str) -> list[float]:
    return [s.value for s in parse_text(text).samples if s.name == name]


@pytest.mark.unit
def test_profiling_fields_say_memory_bound_under_load():
    gpus = SimulatedGpus(n=2, t_ns=0)
    idle = gpus.render_metrics(t_ns=1 * S)
    gpus.set_utilization(1.0, t_ns=1 * S)
    busy = gpus.render_metrics(t_ns=2 * S)
    assert _values(idle, "DCGM_FI_PROF_DRAM_ACTIVE") == [0.02, 0.02]
    assert _values(busy, "DCGM_FI_PROF_DRAM_ACTIVE") == [0.8, 0.8]  # > 0.5: the stat's DRAM threshold
    assert _values(busy, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == [0.2, 0.2]  # < 0.3: its tensor threshold
    assert _values(busy, "DCGM_FI_DEV_XID_ERRORS") == [0, 0]
    assert _values(busy, "DCGM_FI_DEV_POWER_VIOLATION") == [0, 0]  # 450 W of 1100 W: never throttled


@pytest.mark.unit
def test_power_violation_counts_the_ns_at_the_limit():
    gpus = SimulatedGpus(n=1, idle_w=100.0, load_w=700.0, limit_w=400.0, t_ns=0)
    gpus.set_utilization(1.0, t_ns=1 * S)  # 700 W wanted, 400 W allowed: throttled from here
    gpus.set_utilization(0.25, t_ns=3 * S)  # 250 W: not throttled
    gpus.set_utilization(0.5, t_ns=4 * S)  # 400 W: at the limit, throttled
    text = gpus.render_metrics(t_ns=int(4.5 * S))
    assert _values(text, "DCGM_FI_DEV_POWER_VIOLATION") == [2.5 * S]
    assert "# TYPE DCGM_FI_DEV_POWER_VIOLATION counter" in text
    gpus.profile.xid = 79
    assert _values(gpus.render_metrics(t_ns=5 * S), "DCGM_FI_DEV_XID_ERRORS") == [79]


@pytest.mark.sim
def test_sglang_server_histograms_agree_with_the_truth(sim_factory):
    sim = sim_factory("--speed", "8", "--max-running", "2")

    async def scenario() -> str:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{sim.url}/v1/models") as r:
                model = (await r.json())["data"][0]["id"]
            body = {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 24,
                    "stream": True}
            async def one():
                async with s.post(f"{sim.url}/v1/chat/completions", json=body) as r:
                    await r.read()
            await asyncio.gather(*(one() for _ in range(5)))  # 5 requests, 2 running: some queue
            for _ in range(100):  # the simulator writes a request's truth row just after its last byte
                if len(sim.truth_rows()) == 5:
                    break
                await asyncio.sleep(0.05)
            async with s.get(f"{sim.url}/metrics") as r:
                return await r.text()

    text = asyncio.run(scenario())
    rows = sim.truth_rows()
    assert [r["outcome"] for r in rows] == ["ok"] * 5

    def sample(name: str) -> float:
        (value,) = [float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)]
        return value

    assert sample("sglang:e2e_request_latency_seconds_count") == 5
    assert sample("sglang:e2e_request_latency_seconds_sum") == pytest.approx(
        sum((r["t_end_ns"] - r["t_arrival_ns"]) / 1e9 for r in rows), rel=1e-6)
    assert sample("sglang:queue_time_seconds_count") == 5
    assert sample("sglang:queue_time_seconds_sum") > 0  # three of them waited for a slot
    tokens_after_first = sum(sum(r["chunk_tokens"][1:]) for r in rows)
    assert sample("sglang:inter_token_latency_seconds_count") == tokens_after_first
    assert sample("sglang:token_usage") == 0  # nothing running any more
    assert sample("sglang:cache_hit_rate") == 0
