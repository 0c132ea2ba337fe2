"""Latency targets against the simulator with 8 slots (requests beyond them queue): each cell's attainment
equals the fraction recomputed here from its own JSONL records, cells below the knee meet and cells well
above it miss; `loadgen search` finds a concurrency whose cell meets and whose next probe above misses, both
recomputed from the records, in at most 10 cells, prints no line wider than 120 columns, and the same command
again resumes without measuring."""

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
    """Each concurrency's first measurement (a search may measure a load again: `again`) and its records (those of
    the run that measured it: the drift check's control measurement has a run id of its own)."""
    cells = {c["concurrency"]: c for c in read_json(str(out))["cells"] if not c.get("again")}
    rows: dict[int, list] = {}
    for r in read_jsonl(str(out).replace(".json", ".requests.jsonl")):
        c = r["cell"]["concurrency"]
        if not r["cell"].get("again") and c in cells and r["run_id"] == cells[c]["run_id"]:
            rows.setdefault(c, []).append(r)
    return cells, rows


def test_attainment_is_the_records_fraction_and_the_knee_separates_met_from_missed(sim_factory, tmp_path):
    sim = sim_factory("--max-running", str(SLOTS), "--speed", "4")
    out = tmp_path / "run.json"
    # one wave of 32 on 8 slots: queued together (no --slot-ramp), so c=32 misses and c=4 meets
    r = run_loadgen("--url", sim.url, "--concurrency", "4,32", "--requests-per-cell", "32", *ARGS, "--slot-ramp", "0",
                    "--out", str(out))
    assert r.returncode == 0, r.stderr
    cells, rows = by_concurrency(out)
    for c, cell in cells.items():
        slo = cell["slo"]
        assert slo["scheduled"] == 32 and slo["targets_s"] == {"ttft": TTFT_S, "tpot": TPOT_S}
        assert abs(slo["attainment"] - recomputed(rows[c], 32)) <= 1 / 32, (c, slo)
        assert slo["good_output_tok_s"] == pytest.approx(slo["good"] * 64 / cell["duration_s"], rel=1e-9)
    assert cells[4]["slo"]["met"] and not cells[32]["slo"]["met"], {c: v["slo"] for c, v in cells.items()}
    assert "SLO" in r.stdout.splitlines()[1] and "MISS" in r.stdout


def pooled(out, concurrency: int, parts: list[int]) -> tuple[float, int]:
    """good / planned over the cells (`again` in `parts`) of one concurrency from the records alone, and the
    planned requests: a probe's verdict pools its parts."""
    cells = [c for c in read_json(str(out))["cells"] if c["concurrency"] == concurrency
             and (c.get("again") or 0) in parts]
    planned = sum(c["slo"]["scheduled"] for c in cells)
    rows = [r for r in read_jsonl(str(out).replace(".json", ".requests.jsonl"))
            if r["cell"]["concurrency"] == concurrency and (r["cell"].get("again") or 0) in parts]
    return recomputed(rows, planned), planned


def test_search_answer_meets_and_the_probe_above_misses_from_the_records(sim_factory, tmp_path):
    sim = sim_factory("--max-running", str(SLOTS), "--speed", "4")
    out = tmp_path / "search.json"
    argv = ["search", "--url", sim.url, "--start", "4", "--growth", "2", "--probe-min-seconds", "1",
            "--max-cells", "24", *ARGS, "--out", str(out)]
    r = run_loadgen(*argv)
    assert r.returncode == 0, r.stderr
    doc = read_json(str(out))
    answer = doc["search"]["answers"]["60"]
    assert len(answer["probes"]) == len(doc["cells"]) <= 24 and answer["complete"], answer
    met, missed = answer["met"], answer["missed"]
    assert missed is not None and met is not None and met < missed
    assert pooled(out, met, answer["met_parts"])[0] >= 0.9 and pooled(out, missed, answer["missed_parts"])[0] < 0.9
    assert min(c for c in answer["probes"] if c > met) == missed  # the next load above the answer missed
    # 16 streams on 8 slots: latency climbs while tok/s stays at 8 slots' worth: stopped early, and said so
    cells, _ = by_concurrency(out)
    early = [i["reason"] for i in cells[16]["incidents"] if i["kind"] == "oversaturated"]
    assert early and early[0].startswith("stopped early: over-saturated") and cells[16]["requests_not_sent"] > 0
    assert "stopped early: over-saturated" in r.stdout
    assert f"highest concurrency that meets the SLO: {met}" in r.stdout
    assert f"met    c={met}" in r.stdout and f"missed c={missed}" in r.stdout
    assert [line for line in (r.stdout + r.stderr).splitlines() if len(line) > 120] == []  # wrapped, never wider
    lines = len(read_jsonl(str(out).replace(".json", ".requests.jsonl")))
    again = run_loadgen(*argv)
    assert again.returncode == 0, again.stderr
    assert "resuming the search" in again.stderr
    assert len(read_jsonl(str(out).replace(".json", ".requests.jsonl"))) == lines  # nothing measured again
    assert read_json(str(out))["search"]["answers"]["60"] == answer
