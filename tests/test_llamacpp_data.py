"""What loadgen reads from a real llama-server (the real-engine tier's server and helpers, tests/test_llamacpp.py):
prompts counted by the server's own chat and completions counts, usage from the usage chunk (chat) and the
finish chunk (completions), cached prompt tokens request by request against the server's log, the unique part
of each prompt first, and accept length from the `llamacpp:` counters and the server's log lines."""

from __future__ import annotations

import asyncio
import shlex
from collections import Counter

import aiohttp
import pytest

from tests.llamacpp.server import LlamaServer
from tests.test_llamacpp import MAX_TOKENS, N_MAX, measured_run, model, server_accept_length, spec_server

pytestmark = pytest.mark.engine

__all__ = ["model", "spec_server"]  # the tier's fixtures, shared
CONTEXTS = (60, 128)


async def _opening_tokens(url: str) -> int:
    """Tokens before a chat message's text: BOS and the chatml opening `<|im_start|>user\\n`."""
    async with aiohttp.ClientSession() as s, s.post(url + "/tokenize", json={"content": "<|im_start|>user\n",
                                                                             "add_special": True}) as resp:
        return len((await resp.json())["tokens"])


def run_matrix(server: LlamaServer, out, api: str):
    log = f"tail -n 0 -s 0.05 -F {shlex.quote(str(server.log_path))}"
    return measured_run(server, out, "--api", api, "--concurrency", "1,2", "--contexts", "60,128",
                        "--requests-per-cell", "4", "--accept-log-cmd", log)


@pytest.fixture(scope="module", params=["openai-chat", "openai-completions"])
def data_run(request, spec_server, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "run.json"
    return request.param, spec_server, run_matrix(spec_server, out, request.param)


def test_every_request_is_ok_with_usage_from_where_the_server_put_it(data_run):
    api, _, run = data_run
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert Counter(r["outcome"] for r in run.records) == {"ok": 4 * 4}, [r["error"] for r in run.records]
    assert all(r["completion_tokens"] == MAX_TOKENS for r in run.records)
    # the model is its own draft, so nearly every draft is accepted (not always: the draft and the verify pass
    # compute in batches of different sizes, and near-tied logits of random weights can break either way)
    assert all(0 < r["spec"]["draft_n_accepted"] <= r["spec"]["draft_n"] for r in run.records)


def test_prompt_tokens_are_the_target_by_the_servers_own_count(data_run):
    api, _, run = data_run
    sizing = run.doc["prompt_sizing"]
    assert sizing["exact"] and not sizing["estimated"]
    if api == "openai-chat":
        assert sizing["counted_by"] == "llama.cpp /v1/chat/completions/input_tokens"
        assert sizing["template_tokens"] > 0  # chatml costs tokens; they are inside the count, not assumed
    else:
        assert sizing["counted_by"] == "llama.cpp /tokenize"
    for r in run.records:
        assert abs(r["prompt_tokens"] - r["cell"]["context_tokens"]) <= 1, r["request_id"]
    assert sum(r["prompt_tokens"] == r["cell"]["context_tokens"] for r in run.records) >= len(run.records) - 1


def test_cached_tokens_are_the_servers_and_only_the_template_opening_is_shared(data_run):
    api, server, run = data_run
    streamed = [t for t in run.tasks if t.generated > 1]  # the 1-token tasks are the setup probes
    computed = sorted(r["prompt_tokens"] - r["cached_tokens"] for r in run.records)
    assert computed == sorted(t.prompt_tokens for t in streamed)  # the server's log: prompt tokens evaluated
    shared = asyncio.run(_opening_tokens(server.url)) if api == "openai-chat" else 1  # 1: BOS
    # + 1: the unique tag's first token, when the slot's previous prompt began with the same digit group
    assert all(r["cached_tokens"] <= shared + 1 for r in run.records), [r["cached_tokens"] for r in run.records]
    for cell in run.doc["cells"]:
        mine = [r for r in run.records if (r["cell"]["context_tokens"], r["cell"]["concurrency"])
                == (cell["context_tokens"], cell["concurrency"])]
        assert cell["cached_tokens"] == sum(r["cached_tokens"] for r in mine)


def test_accept_length_from_the_counters_and_the_log_is_the_servers(data_run):
    _, _, run = data_run
    truth = server_accept_length(run.delta)
    assert truth == pytest.approx(N_MAX + 1, rel=0.02)
    for cell in run.doc["cells"]:
        acc = cell["accept_length"]
        srv = cell["telemetry"]["server_metrics"]["llamacpp"]
        assert acc["source"] == "counters"
        assert acc["value"] == pytest.approx(1 + srv["accepted_tokens"] / srv["drafts"], rel=1e-9)
        assert acc["per_source"]["log"] == pytest.approx(acc["value"], rel=0.02)
        assert "one event per token" in acc["unavailable"]["chunks"]  # not a ~1.0 "accept length"
        assert "no verify step count" in acc["unavailable"]["per_request"]
        assert cell["draft_tokens"]["accepted"] == srv["accepted_tokens"]
        assert cell["draft_tokens"]["proposed"] == srv["draft_tokens"]
    # pooled over the cells, the counter deltas agree with the server's own over the whole run
    cells = [c["telemetry"]["server_metrics"]["llamacpp"] for c in run.doc["cells"]]
    pooled = 1 + sum(c["accepted_tokens"] for c in cells) / sum(c["drafts"] for c in cells)
    assert pooled == pytest.approx(truth, rel=0.02)
