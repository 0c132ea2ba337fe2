"""--shard i/N + `loadgen merge`: the split is a partition, merged figures are recomputed from the merged
records, clocks are rebased, and N real shard processes against one simulator send what one process sends."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadgen.cli.checks import parse_start_at
from loadgen.cli.parallel_config import parse_shard
from loadgen.errors import UsageError
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.cell import summarize
from loadgen.record import CellKey, Record
from loadgen.results.merge import check_shards, clock_offset_ns, merge, overlap
from loadgen.schedule.jobs import JobList
from loadgen.schedule.split import ShardJobs, part_of, slot_counts
from tests.conftest import ROOT, run_loadgen
from tests.schema_check import assert_documented


# ---- the split --------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_slot_counts_and_owner():
    assert slot_counts(8, 2) == [4, 4]
    assert slot_counts(10, 4) == [3, 3, 2, 2]
    assert slot_counts(1, 3) == [1, 0, 0]
    assert [part_of(j, 10, 4) for j in range(12)] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 0, 1]


@pytest.mark.unit
@given(st.integers(1, 40), st.integers(1, 9), st.integers(0, 200))
def test_shards_partition_the_jobs_in_order(slots, parts, n_jobs):
    jobs = JobList([{"n": i} for i in range(7)], n_jobs, warmup=0)
    views = [ShardJobs(jobs, slots, parts, i) for i in range(parts)]
    seqs = [[job.seq for job in v] for v in views]
    assert sorted(s for part in seqs for s in part) == list(range(n_jobs))  # every job exactly once
    for i, part in enumerate(seqs):
        assert part == sorted(part)  # each shard sends its jobs in sequence order
        assert all(part_of(s, slots, parts) == i for s in part)
        assert len(views[i]) == len(part)


@pytest.mark.unit
def test_shard_and_start_parsing():
    assert parse_shard("2/8") == (2, 8)
    for bad in ("8/8", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(UsageError):
            parse_shard(bad)
    assert parse_start_at("+30", now_s=1000.0) == 1030.0
    assert parse_start_at("1767225600") == 1767225600.0
    assert parse_start_at("2026-01-01T00:00:00+00:00") == 1767225600.0
    with pytest.raises(UsageError):
        parse_start_at("soon")


# ---- merge, pure -------------------------------------------------------------------------------------------
def _rec(run: str, seq: int, t0: int, tokens: int = 8) -> dict:
    r = Record(run_id=run, cell=CellKey(60, 2), seq=seq, request_id=f"{run}-{seq}", t_intended_ns=t0,
               t_sent_ns=t0, t_first_byte_ns=t0 + 1_000_000, t_first_token_ns=t0 + 2_000_000 + seq * 100_000,
               t_last_token_ns=t0 + 9_000_000, t_end_ns=t0 + 10_000_000, completion_tokens=tokens,
               prompt_tokens=60,
               chunks=4, chunk_tokens=[1, 2, 2, 3], chunk_gaps_ns=[2_000_000, 2_000_000, 3_000_000])
    return r.to_dict()


def _doc(run: str, mono: int, wall: int, boot: str, index: int) -> dict:
    cell = {"context_tokens": 60, "concurrency": 2, "client": {"loop_lag_p99_s": 0.001 * (index + 1),
            "cpu_percent": 10.0 * (index + 1), "saturated": index == 1, "reasons": ["x"] if index else []},
            "accept_length": {"per_source": {"counters": 3.9, "per_request": 1.0}}, "power": None,
            "requests_not_sent": 0, "warnings": []}
    return {"schema": "loadgen.results/v1", "run_id": run, "anchor": {"mono_ns": mono, "wall_ns": wall},
            "host": {"boot_id": boot}, "shard": {"index": index, "count": 2}, "cells": [cell], "args": {}}


@pytest.mark.unit
def test_clock_offset_same_boot_and_other_host():
    a = _doc("a", 1_000, 5_000_000, "boot-1", 0)
    assert clock_offset_ns(_doc("b", 7_000, 9_000_000, "boot-1", 1), a) == 0  # one CLOCK_MONOTONIC
    # another host: wall − mono is 8_993_000 there and 4_999_000 here, so its times move by the difference
    assert clock_offset_ns(_doc("b", 7_000, 9_000_000, "boot-2", 1), a) == 8_993_000 - 4_999_000


@pytest.mark.unit
def test_merge_recomputes_from_the_merged_records():
    t = 10**12
    docs = [_doc("a", 0, 0, "boot-1", 0), _doc("b", 0, 0, "boot-1", 1)]
    rows = [[_rec("a", 0, t), _rec("a", 2, t + 10**7, 12)],
            [_rec("b", 1, t + 5 * 10**6), _rec("b", 3, t + 10**7)]]
    doc, merged = merge(docs, rows)
    (cell,) = doc["cells"]
    again = summarize([Record.from_dict(r) for r in merged])
    assert cell["output_tokens"] == 8 + 12 + 8 + 8 == again["output_tokens"]
    assert cell["ttft_s"] == again["ttft_s"] and cell["itl_s"] == again["itl_s"]
    assert cell["duration_s"] == pytest.approx(0.020)  # first send to last end over both shards
    assert cell["requests"] == {"ok": 4, "failed": 0, "cancelled": 0, "by_outcome": {"ok": 4}}
    assert cell["client"]["saturated"] is True and cell["client"]["cpu_percent"] == 20.0
    assert cell["client"]["reasons"] == ["shard 1: x"]
    # the server's counters come from the first shard; the per-request value is recomputed from records
    assert cell["accept_length"]["per_source"]["counters"] == 3.9
    assert cell["accept_length"]["per_source"]["chunks"] == again.get("accept_length_chunks",
                                                                      again["tokens_per_chunk_mean"])
    assert [r["t_end_ns"] for r in merged] == sorted(r["t_end_ns"] for r in merged)
    assert cell["shards"]["requests"] == [2, 2] and cell["requests_not_sent"] == 0


@pytest.mark.unit
def test_merge_leaves_out_the_drift_control_and_keeps_each_shards_drift():
    """The drift check's control (`<run>-control`) shares the first cell's key: its records are not the cell's."""
    t = 10**12
    docs = [_doc("a", 0, 0, "boot-1", 0), _doc("b", 0, 0, "boot-1", 1)]
    docs[0]["drift"] = {"drifted": False, "factor": 1.1}
    control = _rec("a", 0, t + 10**8, 99) | {"run_id": "a-control", "request_id": "a-control-0"}
    rows = [[_rec("a", 0, t), control], [_rec("b", 1, t + 5 * 10**6)]]
    doc, merged = merge(docs, rows)
    (cell,) = doc["cells"]
    assert cell["output_tokens"] == 16 and cell["requests"]["ok"] == 2
    assert len(merged) == 3  # the control's record is kept in the merged JSONL
    assert "drift" not in doc and doc["merged_from"][0]["drift"] == {"drifted": False, "factor": 1.1}
    assert "drift" not in doc["merged_from"][1]
    docs[1]["drift"] = {"drifted": True, "factor": 8.0, "sentence": "the server got 8.0× slower during the run"}
    assert check_shards(docs, ["a.json", "b.json"]) == ["b.json: DRIFT: the server got 8.0× slower during the run"]


@pytest.mark.unit
def test_overlap():
    assert overlap([(0, 10), (1, 10)]) == pytest.approx(0.9)
    assert overlap([(0, 10), (20, 30)]) == 0.0
    assert overlap([(0, 10)]) is None


# ---- real shard processes ----------------------------------------------------------------------------------
ARGS = ("--concurrency", "1,4", "--contexts", "60", "--max-tokens", "256", "--requests-per-cell", "24",
        "--warmup", "2", "--server-metrics", "off")


@pytest.mark.sim
def test_two_shards_and_merge_equal_one_process(sim_factory, tmp_path):
    sim = sim_factory("--speed", "8")
    # one start for both, as on two hosts: an absolute time, not "+S" that each process reads when it has
    # started (two starts on a busy machine differ by ~0.1 s, a seventh of the 4-slot cell); cell 1 starts one
    # period later, past cell 0's ~2.5 s on shard 0 with room for a slow machine
    start_at = f"{time.time() + 4:.3f}"
    procs = [subprocess.Popen([sys.executable, "-m", "loadgen", "--url", sim.url, *ARGS, "--shard", f"{i}/2",
                               "--run-id", "shards", "--start-at", start_at, "--cell-period", "4",
                               "--out", str(tmp_path / f"s{i}.json")], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err  # shard 1 has no slot in the 1-slot cell: skipped there, not failed
    merged = tmp_path / "m.json"
    proc = run_loadgen("merge", str(merged), str(tmp_path / "s0.json"), str(tmp_path / "s1.json"))
    assert proc.returncode == 0, proc.stderr
    one = tmp_path / "one.json"
    proc = run_loadgen("--url", sim.url, *ARGS, "--out", str(one))
    assert proc.returncode == 0, proc.stderr
    doc, recs = read_json(str(merged)), read_jsonl(str(merged)[:-5] + ".requests.jsonl")
    one_doc, one_recs = read_json(str(one)), read_jsonl(str(one)[:-5] + ".requests.jsonl")
    for written in (doc, one_doc, read_json(str(tmp_path / "s0.json")), read_json(str(tmp_path / "s1.json"))):
        assert_documented(written)
    # the shards together sent exactly the requests one process sends: same cells, sequence numbers, tokens
    key = Counter((r["cell"]["concurrency"], r["seq"], r["phase"], r["completion_tokens"]) for r in recs)
    assert key == Counter((r["cell"]["concurrency"], r["seq"], r["phase"], r["completion_tokens"])
                          for r in one_recs)
    assert len({r["request_id"] for r in recs}) == len(recs) == 2 * 26
    truth = {t["rid"]: t for t in sim.truth_rows()}
    for r in recs:
        assert r["outcome"] == "ok" and r["chunk_tokens"] == truth[r["request_id"]]["chunk_tokens"]
    for cell, cell_one in zip(doc["cells"], one_doc["cells"]):
        assert cell["requests"] == cell_one["requests"] == {"ok": 24, "failed": 0, "cancelled": 0, "by_outcome": {"ok": 24}}
        assert cell["output_tokens"] == cell_one["output_tokens"] == 24 * 256
        mine = [Record.from_dict(r) for r in recs
                if r["phase"] == "measure" and r["cell"]["concurrency"] == cell["concurrency"]]
        assert cell["ttft_s"] == summarize(mine)["ttft_s"]
    narrow = read_json(str(tmp_path / "s1.json"))["cells"][0]
    assert narrow["status"] == "skipped" and narrow["error"].startswith("no slot for shard 1/2")
    wide = doc["cells"][1]
    assert wide["shards"]["requests"] == [12, 12]
    # both shards loaded the server together: their windows start within a timer's lateness of each other
    assert wide["shards"]["window_overlap"] > 0.7
    # with the load split over two processes at the same moments, aggregate throughput matches one process
    assert wide["output_tok_s"] == pytest.approx(one_doc["cells"][1]["output_tok_s"], rel=0.2)
