"""Latency targets against the simulator with 8 slots (requests beyond them queue): each cell's attainment
equals the fraction recomputed here from its own JSONL records, cells below the knee meet and cells well
above it miss; `loadgen search` finds a concurrency whose cell meets and whose next probe above misses, both
recomputed from the records, in at most 10 cells, and the same command again resumes without measuring."""

from __future__ import annotations

import pytest

from loadgen.files import read_json, read_jsonl
from tests.conftest import run_loadgen

pytestmark = pytest.mark.sim

SLOTS = 8
TTFT_S = 0.03  # about half a 64-token request's decode at --speed 4: a request that waited one slot misses
TPOT_S = 0.05
ARGS = ["--contexts", "60", "--max-tokens", "64", "--slo", f"ttft={TTFT_S * 1e3:g}ms,tpot={TPOT_S * 1e3:g}ms"]


def recomputed(rows: list[dict], planned: int) -> float:
    """good / planned from the records alone: succeeded, TTFT = t_first_token − t_sent, TPOT = (t_last_token −
    t_first_token) / (tokens − 1) within the targets; a request never sent has no record and is not good."""
    def good(r: dict) -> bool:
        if r["outcome"] != "ok" or r["t_first_token_ns"] is None:
            return False
        ttft = (r["t_first_token_ns"] - r["t_sent_ns"]) / 1e9
        n = r["completion_tokens"]
        tpot = (r["t_last_token_ns"] - r["t_first_token_ns"]) / 1e9 / (n - 1) if n > 1 else 0.0
        return ttft <= TTFT_S and tpot <= TPOT_S
    return sum(good(r) for r in rows if r["phase"] == "measure") / planned


def by_concurrency(out) -> tuple[dict, dict]:
    cells = {c["concurrency"]: c for c in read_json(str(out))["cells"]}
    rows: dict[int, list] = {}
    for r in read_jsonl(str(out).replace(".json", ".requests.jsonl")):
        rows.setdefault(r["cell"]["concurrency"], []).append(r)
    return cells, rows


def test_attainment_is_the_records_fraction_and_the_knee_separates_met_from_missed(sim_factory, tmp_path):
    sim = sim_factory("--max-running", str(SLOTS), "--speed", "4")
    out = tmp_path / "run.json"
    r = run_loadgen("--url", sim.url, "--concurrency", "4,32", "--requests-per-cell", "32", *ARGS, "--out", str(out))
    assert r.returncode == 0, r.stderr
    cells, rows = by_concurrency(out)
    for c, cell in cells.items():
        slo = cell["slo"]
        assert slo["scheduled"] == 32 and slo["targets_s"] == {"ttft": TTFT_S, "tpot": TPOT_S}
        assert abs(slo["attainment"] - recomputed(rows[c], 32)) <= 1 / 32, (c, slo)
        assert slo["good_output_tok_s"] == pytest.approx(slo["good"] * 64 / cell["duration_s"], rel=1e-9)
    assert cells[4]["slo"]["met"] and not cells[32]["slo"]["met"], {c: v["slo"] for c, v in cells.items()}
    assert "SLO" in r.stdout.splitlines()[1] and "MISS" in r.stdout


def test_search_answer_meets_and_the_probe_above_misses_from_the_records(sim_factory, tmp_path):
    sim = sim_factory("--max-running", str(SLOTS), "--speed", "4")
    out = tmp_path / "search.json"
    argv = ["search", "--url", sim.url, "--start", "4", "--growth", "2", *ARGS, "--out", str(out)]
    r = run_loadgen(*argv)
    assert r.returncode == 0, r.stderr
    doc = read_json(str(out))
    answer = doc["search"]["answers"]["60"]
    cells, rows = by_concurrency(out)
    assert len(cells) <= 10 and len(answer["probes"]) == len(cells)
    met, missed = answer["met"], answer["missed"]
    assert missed is not None and met is not None and met < missed
    planned = {c: max(16, 3 * c) for c in cells}  # the default requests per cell; never-sent ones are not good
    assert recomputed(rows[met], planned[met]) >= 0.9 and recomputed(rows[missed], planned[missed]) < 0.9, answer
    above = [c for c in cells if c > met]
    assert min(above) == missed  # the next probe above the answer is the one that missed
    # 16 streams on 8 slots: latency climbs while tok/s stays at 8 slots' worth: stopped early, and said so
    early = [i["reason"] for i in cells[16]["incidents"] if i["kind"] == "oversaturated"]
    assert early and early[0].startswith("stopped early: over-saturated") and cells[16]["requests_not_sent"] > 0
    assert "stopped early: over-saturated" in r.stdout
    assert f"highest concurrency that meets the SLO: {met}" in r.stdout
    assert f"met    c={met}" in r.stdout and f"missed c={missed}" in r.stdout
    lines = len(read_jsonl(str(out).replace(".json", ".requests.jsonl")))
    again = run_loadgen(*argv)
    assert again.returncode == 0, again.stderr
    assert "resuming the search" in again.stderr
    assert len(read_jsonl(str(out).replace(".json", ".requests.jsonl"))) == lines  # nothing measured again
    assert read_json(str(out))["search"]["answers"]["60"] == answer
