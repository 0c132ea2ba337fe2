"""The real-engine tier: loadgen against llama.cpp's llama-server with speculative decoding on.

llama-server is built from the llama.cpp vendored in the llama-cpp-python sdist by scripts/build-llama-server.sh
(scripts/test-deps.sh calls it; cached per version outside the repo). The model is a tiny random-weight llama
(tests/llamacpp/tiny_model.py) used as its own draft, so every draft token is accepted. The server's own truth
is its `/metrics` counters (read before and after a run) and its log, which prints every task's generated
tokens, prompt tokens evaluated and draft acceptance (tests/llamacpp/server.py `tasks`).

Without the binary these tests skip and name the script; with CI=true a missing binary is a failure (CI runs
scripts/test-deps.sh first, so a missing binary there is a broken build, not a choice).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.target.discover import discover
from loadgen.target.readiness import wait_ready
from tests.conftest import run_loadgen
from tests.llamacpp.server import BUILD_HINT, VERSION, LlamaServer, binary, cache_dir, spec_args, start_server, tasks
from tests.llamacpp.tiny_model import FAST_VOCAB, tiny_model

pytestmark = pytest.mark.engine

MAX_TOKENS = 32
N_MAX = 4
PER_CELL = 6


def require_binary() -> None:
    if binary() is None:
        assert os.environ.get("CI", "").lower() != "true", f"CI=true but llama-server is not built; {BUILD_HINT}"
        pytest.skip(f"llama-server {VERSION} not built in {cache_dir()}: {BUILD_HINT}")


@pytest.fixture(scope="module")
def model() -> Path:
    require_binary()
    return tiny_model()


@pytest.fixture(scope="module")
def spec_server(model, tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("llama"), spec_args(model, model, n_max=N_MAX))
    yield server
    server.stop()


@dataclass
class Run:
    proc: object
    doc: dict
    records: list[dict]
    delta: dict[str, float]  # the server's counters over the whole run
    tasks: list  # the server's tasks of the run, from its log


def measured_run(server: LlamaServer, out: Path, *args: str) -> Run:
    """One loadgen run against `server`, with the server's counters and log tasks over it."""
    before, seen = server.metrics(), set(tasks(server.log()))
    proc = run_loadgen("--url", server.url, "--max-tokens", str(MAX_TOKENS), "--out", str(out), *args, timeout=120)
    records = read_jsonl(str(out)[: -len(".json")] + ".requests.jsonl") if out.exists() else []
    deadline = time.monotonic() + 5  # the log is written by the server's own thread: wait until it shows them
    while True:
        delta = {k: v - before.get(k, 0.0) for k, v in server.metrics().items()}
        new = [t for i, t in tasks(server.log()).items() if i not in seen and t.generated is not None]
        if sum(t.generated for t in new) >= delta["llamacpp:tokens_predicted_total"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return Run(proc, read_json(str(out)) if out.exists() else {}, records, delta, new)


@pytest.fixture(scope="module")
def chat_run(spec_server, tmp_path_factory) -> Run:
    out = tmp_path_factory.mktemp("chat") / "chat.json"
    return measured_run(spec_server, out, "--concurrency", "1,2", "--contexts", "60,128",
                        "--requests-per-cell", str(PER_CELL))


def server_accept_length(delta: dict[str, float]) -> float:
    """vLLM's formula, which llama.cpp's counters share: 1 + Δaccepted / Δdrafts."""
    return 1 + delta["llamacpp:spec_decode_num_accepted_tokens_total"] / delta["llamacpp:spec_decode_num_drafts_total"]


def test_every_request_is_ok_and_the_target_is_llamacpp(chat_run):
    assert chat_run.proc.returncode == 0, chat_run.proc.stderr[-2000:]
    assert len(chat_run.records) == 4 * PER_CELL
    assert Counter(r["outcome"] for r in chat_run.records) == {"ok": 4 * PER_CELL}
    for cell in chat_run.doc["cells"]:
        assert cell["status"] == "ok" and cell["requests"]["failed"] == 0, cell.get("error")
    target = chat_run.doc["target"]
    assert target["engine"] == "llamacpp"
    info = target["server_info"]
    assert info["speculative"] is True and info["parallel_slots"] == 2 and info["context_length"] == 512
    assert info["speculative_draft_n_max"] == N_MAX and info["speculative_type"] == "draft-simple"
    assert "process command line" in info["settings_from"]


def test_output_tokens_equal_the_servers_counters_request_by_request(chat_run):
    streamed = [t for t in chat_run.tasks if t.generated > 1]  # the 1-token tasks are the setup probes
    assert sum(t.generated for t in chat_run.tasks) == chat_run.delta["llamacpp:tokens_predicted_total"]
    assert sorted(r["completion_tokens"] for r in chat_run.records) == sorted(t.generated for t in streamed)
    assert all(r["completion_tokens"] == MAX_TOKENS for r in chat_run.records)
    measured = sum(c["output_tokens"] for c in chat_run.doc["cells"])
    assert measured == sum(t.generated for t in streamed)
    assert chat_run.delta["llamacpp:tokens_predicted_total"] - measured == len(chat_run.tasks) - len(streamed)


def test_every_draft_token_is_accepted_by_the_server(chat_run):
    """The premise of the accept-length checks: the model drafting for itself."""
    streamed = [t for t in chat_run.tasks if t.generated > 1]
    assert streamed and all(t.draft_accepted == t.draft_generated > 0 for t in streamed)
    assert server_accept_length(chat_run.delta) == pytest.approx(N_MAX + 1, rel=0.05)


def test_prompt_tokens_are_on_target(chat_run):
    for r in chat_run.records:
        assert abs(r["prompt_tokens"] - r["cell"]["context_tokens"]) <= 1, r["request_id"]


def test_accept_length_is_the_servers_own(chat_run):
    truth = server_accept_length(chat_run.delta)
    for cell in chat_run.doc["cells"]:
        accept = cell["accept_length"]
        assert accept["source"] in ("counters", "per_request", "log"), accept
        assert accept["value"] == pytest.approx(truth, rel=0.02), (cell["context_tokens"], cell["concurrency"])


def test_openai_completions_runs_clean(spec_server, tmp_path):
    run = measured_run(spec_server, tmp_path / "completions.json", "--api", "openai-completions",
                       "--concurrency", "2", "--contexts", "60", "--requests-per-cell", "4")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert Counter(r["outcome"] for r in run.records) == {"ok": 4}, [r["error"] for r in run.records]
    streamed = [t for t in run.tasks if t.generated > 1]
    assert sorted(r["completion_tokens"] for r in run.records) == sorted(t.generated for t in streamed)
    for r in run.records:
        assert abs(r["prompt_tokens"] - 60) <= 1, r["request_id"]
    assert run.doc["cells"][0]["accept_length"]["value"] == pytest.approx(server_accept_length(run.delta), rel=0.02)


def test_a_context_beyond_the_slot_exits_2_before_any_load(spec_server, tmp_path):
    run = measured_run(spec_server, tmp_path / "too_long.json", "--concurrency", "1", "--contexts", "700")
    assert run.proc.returncode == 2, run.proc.stderr[-2000:]
    line = run.proc.stderr.strip().splitlines()[-1]
    assert "700" in line and "512" in line, line
    assert not run.records
    # what reached the server: at most the readiness check's 1-token generations, never a 700-token prompt
    assert all(t.generated <= 1 and (t.prompt_tokens or 0) < 700 for t in run.tasks), run.tasks


async def _fingerprint(url: str) -> tuple[str, dict]:
    async with aiohttp.ClientSession() as session:
        target = await discover(session, url, "openai-chat", None, "OPENAI_API_KEY")
    return target.fingerprint(), target.server_info


def _fingerprint_of(log_dir: Path, args: list[str], name: str) -> tuple[str, dict]:
    server = start_server(log_dir, args, name=name)
    try:
        return asyncio.run(_fingerprint(server.url))
    finally:
        server.stop()


def test_the_fingerprint_is_the_same_after_load(spec_server, chat_run):
    after_load, _ = asyncio.run(_fingerprint(spec_server.url))
    assert after_load == chat_run.doc["target"]["fingerprint"]


def test_the_fingerprint_follows_the_draft_settings(tmp_path):
    fast = tiny_model(FAST_VOCAB)  # only settings are compared here: the quick-loading model will do
    first, info = _fingerprint_of(tmp_path, spec_args(fast, fast, n_max=N_MAX), "n_max_4")
    again, _ = _fingerprint_of(tmp_path, spec_args(fast, fast, n_max=N_MAX), "n_max_4_again")  # another port
    assert again == first
    other, other_info = _fingerprint_of(tmp_path, spec_args(fast, fast, n_max=2), "n_max_2")
    assert other != first, json.dumps([info, other_info])[:2000]
    assert (info["speculative_draft_n_max"], other_info["speculative_draft_n_max"]) == (N_MAX, 2)
    plain, plain_info = _fingerprint_of(tmp_path, spec_args(fast, None), "no_draft")
    assert plain not in (first, other) and plain_info["speculative"] is False


async def _ready(url: str, expect: dict, timeout_s: float):
    async with aiohttp.ClientSession() as session:
        return await wait_ready(session, url, timeout_s=timeout_s, poll_s=0.2, successes=1, expect=expect)


def test_a_sweeps_expect_map_is_checked_against_the_llamacpp_settings(spec_server):
    """llama-server has no /server_info: the readiness gate checks `expect` against its settings instead."""
    right = asyncio.run(_ready(spec_server.url, {"speculative_draft_n_max": N_MAX, "speculative": True}, 30))
    assert right.ready and right.expect_ok, right.reason
    wrong = asyncio.run(_ready(spec_server.url, {"speculative_draft_n_max": 2}, 1))
    assert not wrong.ready and wrong.expect_ok is False
    assert "speculative_draft_n_max: server has 4, expected 2" in wrong.reason
