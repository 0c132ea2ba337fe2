"""The core's figures against the simulator's exact ground truth, over real sockets, for every API."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.files import read_json, read_jsonl
from tests.conftest import run_loadgen

CONTEXTS = (60, 1024)


def _by_cell(records):
    cells = {}
    for r in records:
        cells.setdefault((r["cell"]["context_tokens"], r["cell"]["concurrency"]), []).append(r)
    return cells


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions", "sglang-generate"])
def test_matrix_matches_truth(api, sim_factory, tmp_path):
    sim = sim_factory("--speed", "5", "--budget", "8")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--api", api, "--concurrency", "1,64", "--contexts", "60,1024",
                       "--max-tokens", "384", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = read_json(str(out))
    records = read_jsonl(str(out)[:-5] + ".requests.jsonl")
    truth = {t["rid"]: t for t in sim.truth_rows()}
    assert len(records) == 2 * (16 + 128)  # the default: max(16, 2 × concurrency) per cell
    assert all(r["outcome"] == "ok" for r in records)
    for r in records:
        t = truth[r["request_id"]]
        # token counts come from the server and equal what it sent, chunk by chunk
        assert r["completion_tokens"] == t["completion_tokens"] == 384
        assert r["chunk_tokens"] == t["chunk_tokens"]
        assert r["chunks"] == len(t["chunk_times_ns"])
        assert r["prompt_tokens"] == t["prompt_tokens"] == r["cell"]["context_tokens"]
    cells = {(c["context_tokens"], c["concurrency"]): c for c in doc["cells"]}
    for key, recs in _by_cell(records).items():
        cell = cells[key]
        rows = [truth[r["request_id"]] for r in recs]
        true_ttft = np.mean([(t["t_first_chunk_ns"] - t["t_arrival_ns"]) / 1e9 for t in rows])
        assert abs(cell["ttft_s"]["mean"] - true_ttft) < 0.002, (key, cell["ttft_s"]["mean"], true_ttft)
        window = (max(t["t_end_ns"] for t in rows) - min(t["t_arrival_ns"] for t in rows)) / 1e9
        true_tok_s = sum(t["completion_tokens"] for t in rows) / window
        assert cell["output_tok_s"] == pytest.approx(true_tok_s, rel=0.03)
        true_accept = sum(t["completion_tokens"] for t in rows) / sum(t["verify_ct"] for t in rows)
        assert cell["tokens_per_chunk_mean"] == pytest.approx(true_accept, rel=0.02)
        assert cell["accept_length"]["value"] == pytest.approx(true_accept, rel=0.02)
        assert cell["prompt_tokens_mean"] == key[0] == cell["prompt_tokens_min"] == cell["prompt_tokens_max"]
        n = max(16, 2 * key[1])
        assert (cell["requests"]["ok"], cell["requests"]["failed"]) == (n, 0)
        assert cell["requests"]["by_outcome"] == {"ok": n}


def test_default_run_starts_the_simulator(tmp_path):
    out = tmp_path / "r.json"
    proc = run_loadgen("--concurrency", "2", "--contexts", "60", "--max-tokens", "16", "--requests-per-cell", "4",
                       "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "built-in simulator" in proc.stderr
    doc = read_json(str(out))
    assert doc["schema"] == "loadgen.results/v1"
    assert doc["target"]["engine"] == "sglang"
    assert doc["target"]["spec"]["speculative_ddtree_budget"] == 8
    (cell,) = doc["cells"]
    for key in ("output_tok_s", "request_tok_s", "ttft_s", "tpot_s", "itl_s", "e2e_s", "prefill_tok_s",
                "tokens_per_chunk_mean", "accept_length", "client", "status", "duration_s", "requests"):
        assert key in cell, key
    assert cell["status"] == "ok"
    assert "out tok/s" in proc.stdout  # the final matrix


def test_user_prompts_file_and_exact_length(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"text": "def add(a, b):\\n    return a + b\\n"}\n{"messages": [{"role": "user", '
                       '"content": "Explain speculative decoding in one paragraph."}]}\n')
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--prompts", str(prompts), "--concurrency", "2", "--contexts", "300",
                       "--max-tokens", "8", "--requests-per-cell", "6", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(str(out)[:-5] + ".requests.jsonl")
    assert [r["prompt_tokens"] for r in recs] == [300] * 6
