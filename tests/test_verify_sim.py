"""--verify against the simulator, whose outputs are deterministic per prompt and whose output faults are known
exactly (its truth rows say where each request's loop or drift began): a clean server, one that loops above a
batch size, one that drifts past a position; each through another API (logprob tokens, token ids, logprob
tokens of completions). The three simulators start together (their start-up is most of these tests' time)."""

from __future__ import annotations

import json

import pytest

from loadgen.names import Phase
from tests.conftest import run_loadgen, start_sim

pytestmark = [pytest.mark.sim, pytest.mark.untimed]  # nothing here is timed against the machine

PROMPTS = ["Explain what a hash table is.", "Write a Python function for Fibonacci numbers.",
           "List the planets of the solar system.", "Translate into French: the train leaves at seven."]
SIMS = {"clean": (), "loop": ("--garbage-above", "16"), "drift": ("--drift-above", "4", "--drift-after", "48")}


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify-sims")
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(len(SIMS)) as pool:
        started = dict(zip(SIMS, pool.map(lambda kv: start_sim(tmp, "--speed", "50", *kv[1], name=f"{kv[0]}.jsonl"),
                                          SIMS.items())))
    yield started
    for sim in started.values():
        sim.stop()


def run(sim, tmp_path, *args: str):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--contexts", "60", "--max-tokens", "24", "--verify-max-tokens", "56",
                       "--verify-prompts", str(prompts), "--out", str(out), *args, timeout=60)
    doc = json.loads(out.read_text())
    records = [json.loads(line) for line in (tmp_path / "r.requests.jsonl").read_text().splitlines()]
    return proc, {c["concurrency"]: c for c in doc["cells"]}, [r for r in records if r["phase"] == Phase.VERIFY]


def test_clean_server_every_output_matches(sims, tmp_path):
    proc, cells, verify = run(sims["clean"], tmp_path, "--concurrency", "1,8", "--requests-per-cell", "16",
                              "--verify", "--verify-save-reference", str(tmp_path / "ref.json"),
                              "--drift-check", "off")  # the control cell would add its own 4 verify records
    assert proc.returncode == 0, proc.stderr[-2000:]
    for cell in cells.values():
        part = cell["correctness"]
        assert part["checked"] == 4 and part["exact_match_fraction"] == 1.0 and part["garbage_fraction"] == 0.0
        assert part["unit"] == "logprobs" and part["first_divergence_tokens"] is None and part["reference"] == "run_start"
        assert 0 < part["output_share"] < 1
    assert len(verify) == 8 and all(r["verify"]["exact"] and r["verify"]["tokens"] == 56 for r in verify)
    assert "exact 4/4" in proc.stdout and " verify " in proc.stdout.splitlines()[1]
    saved = json.loads((tmp_path / "ref.json").read_text())
    assert saved["prompts"] == PROMPTS and len(saved["outputs"]) == 4


def test_repetition_loop_above_16_running_fails_the_cells_at_32(sims, tmp_path):
    sim = sims["loop"]
    proc, cells, verify = run(sim, tmp_path, "--api", "sglang-generate", "--concurrency", "1,8,32",
                              "--requests-per-cell", "32", "--verify")
    assert proc.returncode == 1, proc.stderr[-2000:]
    for c in (1, 8):
        assert cells[c]["status"] == "ok" and cells[c]["correctness"]["garbage_fraction"] == 0.0
        assert cells[c]["correctness"]["exact_match_fraction"] == 1.0
    part = cells[32]["correctness"]
    assert part["unit"] == "ids" and part["garbage_fraction"] >= 0.9 and set(part["garbage"]) == {"repetition_loop"}
    assert cells[32]["status"] == "failed" and cells[32]["error"].startswith("GARBAGE OUTPUT")
    assert [i["kind"] for i in cells[32]["incidents"]].count("garbage_output") == 1
    # the simulator's truth: the verification requests it looped are exactly those judged garbage
    looped = {row["rid"] for row in sim.truth_rows() if row.get("loop_from") is not None}
    flagged = {r["request_id"] for r in verify if r["verify"]["garbage"]}
    assert flagged == looped & {r["request_id"] for r in verify}
    assert "garb 4/4" in proc.stdout


def test_drift_past_48_above_4_running_diverges_without_garbage(sims, tmp_path):
    sim = sims["drift"]
    proc, cells, verify = run(sim, tmp_path, "--api", "openai-completions", "--concurrency", "1,8",
                              "--requests-per-cell", "16", "--verify")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert cells[1]["correctness"]["exact_match_fraction"] == 1.0
    part = cells[8]["correctness"]
    assert part["exact_match_fraction"] < 1 and part["garbage_fraction"] == 0.0
    assert abs(part["first_divergence_tokens"]["p50"] - 48) <= 4
    assert cells[8]["status"] == "ok" and any(i["kind"] == "output_diverged" for i in cells[8]["incidents"])
    truth = {row["rid"]: row for row in sim.truth_rows()}
    for r in verify:  # each divergence where the simulator says it drifted
        assert r["verify"]["divergence"] == truth[r["request_id"]]["drift_from"]
