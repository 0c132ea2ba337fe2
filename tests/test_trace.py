"""Trace replay (`--trace`): the formats parsed from text written here, bad rows named before any load, and a
Mooncake trace replayed against the simulator: every row sent at its timestamp, each prompt of exactly its
input_length (the server's count), each output of its output_length, shared hash ids shared byte for byte."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.workload.trace import BLOCK_TOKENS, Trace, TraceRow, parse_trace
from loadgen.workload.trace_prompts import TAIL_MIN_TOKENS, shared_blocks
from tests.conftest import machine_lag, run_loadgen


def mooncake_rows(n: int, span_ms: float, seed: int = 1) -> list[dict]:
    """`n` rows spread over `span_ms`; the first block of each row is one of four shared ones."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        length = rng.randint(40, 1300)
        ids = [rng.randint(0, 3)] + [100 + 10 * i + j for j in range(1, (length + 511) // 512)]
        rows.append({"timestamp": round(i * span_ms / n + rng.uniform(0, span_ms / n * 0.8), 1),
                     "input_length": length, "output_length": rng.randint(2, 24), "hash_ids": ids})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.unit
def test_each_format_is_parsed_and_sorted_by_time():
    fmt, rows, bad = parse_trace('{"timestamp": 20, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]}\n'
                                 '{"timestamp": 10, "input_length": 30, "output_length": 2, "hash_ids": [9]}\n')
    assert (fmt, bad) == ("Mooncake JSONL", [])
    assert rows == [TraceRow(2, 10.0, 30, 2, (9,)), TraceRow(1, 20.0, 600, 5, (7, 8))]
    fmt, rows, _ = parse_trace('{"timestamp": 0, "input_length": 30, "output_length": 2}\n')
    assert fmt == "plain JSONL" and rows[0].hash_ids == ()
    fmt, rows, bad = parse_trace("output_length,timestamp,input_length,user\n4,1500,100,a\n6,0,50,b\n")
    assert fmt == "plain CSV" and bad == []
    assert [(r.line, r.timestamp_ms, r.input_length, r.output_length) for r in rows] == [(3, 0.0, 50, 6),
                                                                                        (2, 1500.0, 100, 4)]


@pytest.mark.unit
def test_bad_rows_are_named_with_their_line():
    text = ('{"timestamp": 0, "input_length": 30, "output_length": 2}\n'
            'not json\n'
            '{"timestamp": -1, "input_length": 30, "output_length": 2}\n'
            '{"timestamp": 5, "input_length": 0, "output_length": 2}\n'
            '{"timestamp": 5, "input_length": 30}\n'
            '{"timestamp": 5, "input_length": 30, "output_length": 2, "hash_ids": [1, 2]}\n'
            '{"timestamp": 5, "input_length": 30, "output_length": 2, "hash_ids": "x"}\n')
    _, rows, bad = parse_trace(text)
    assert len(rows) == 1
    assert [(b.line, b.reason.split(" (")[0]) for b in bad] == [
        (2, "invalid JSON"), (3, "timestamp -1 must be a number of milliseconds ≥ 0"),
        (4, "input_length 0 must be an integer ≥ 1"), (5, "no output_length"),
        (6, "2 hash_ids name more 512-token blocks than input_length 30 holds"),
        (7, "hash_ids must be a list of integers")]
    _, _, bad = parse_trace("time,input_length,output_length\n0,1,1\n")
    assert bad[0].line == 1 and "no timestamp" in bad[0].reason


@pytest.mark.unit
def test_offsets_rate_and_shared_blocks():
    rows = [TraceRow(1, 1000.0, 30, 2), TraceRow(2, 1500.0, 30, 2), TraceRow(3, 3000.0, 30, 2)]
    t = Trace("t", "plain JSONL", rows)
    assert t.offsets_s(1.0) == [0.0, 0.5, 2.0] and t.offsets_s(4.0) == [0.0, 0.125, 0.5]
    assert t.mean_rate(1.0) == 1.0 and t.mean_rate(2.0) == 2.0  # (3 − 1) rows / 2 s
    assert Trace("t", "plain JSONL", rows[:1]).mean_rate() == 1.0
    ids = (4, 5, 6)
    # a block is shared only when it fits wholly before the row's own tail of at least TAIL_MIN_TOKENS
    assert shared_blocks(TraceRow(1, 0, 3 * BLOCK_TOKENS, 1, ids), 0) == (4, 5)
    assert shared_blocks(TraceRow(1, 0, 2 * BLOCK_TOKENS + TAIL_MIN_TOKENS, 1, ids), 0) == (4, 5)
    assert shared_blocks(TraceRow(1, 0, 2 * BLOCK_TOKENS + TAIL_MIN_TOKENS, 1, ids), 1) == (4,)
    assert shared_blocks(TraceRow(1, 0, BLOCK_TOKENS, 1, ids[:1]), 0) == ()


@pytest.mark.unit
def test_bad_trace_stops_before_any_load(tmp_path, cli):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 30, "output_length": 2}\n{"timestamp": 1}\n')
    res = cli("--url", "http://127.0.0.1:9", "--trace", str(path), "--out", str(tmp_path / "r.json"))
    assert res.returncode == 2
    assert f"{path}:2: no input_length, output_length" in res.stderr
    assert "1 unusable rows (named above), more than --max-bad-rows 0" in res.stderr
    for args, message in ((("--request-rate", "2"), "leave out --request-rate"),
                          (("--trace-speed", "0"), "--trace-speed: 0 must be a finite number > 0"),
                          (("--trace-speed", "2,2"), "a speed appears twice")):
        res = cli("--url", "http://127.0.0.1:9", "--trace", str(path), "--max-bad-rows", "1", *args)
        assert res.returncode == 2 and message in res.stderr
    res = cli("--url", "http://127.0.0.1:9", "--trace-speed", "2")
    assert res.returncode == 2 and "--trace-speed applies to a trace replay; add --trace FILE" in res.stderr


@pytest.mark.sim
def test_a_mooncake_trace_is_replayed_exactly(sim_factory, tmp_path):
    # the simulator also streams each answer's first 4 tokens as reasoning: the same run checks those figures
    # against its truth (one run for both, for the suite's time)
    sim = sim_factory("--speed", "20", "--reasoning-tokens", "4")
    rows = mooncake_rows(200, 10_000)
    path = write_jsonl(tmp_path / "mooncake.jsonl", rows)
    out = tmp_path / "r.json"
    with machine_lag() as machine:
        proc = run_loadgen("--url", sim.url, "--trace", str(path), "--trace-speed", "10", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Mooncake JSONL, 200 rows (0 bad)" in proc.stderr and "trace replay:" in proc.stderr
    (cell,) = read_json(str(out))["cells"]
    records = sorted(read_jsonl(str(out).replace(".json", ".requests.jsonl")), key=lambda r: r["seq"])
    ordered = sorted(rows, key=lambda r: r["timestamp"])
    assert len(records) == 200 and cell["requests"]["ok"] == 200
    assert [r["prompt_tokens"] for r in records] == [r["input_length"] for r in ordered]
    assert [r["completion_tokens"] for r in records] == [r["output_length"] for r in ordered]
    # sent at the timestamps, 10 times as fast: intended times are the trace's offsets / 10
    t0 = records[0]["t_intended_ns"]
    offsets = [(r["t_intended_ns"] - t0) / 1e9 for r in records]
    assert offsets == pytest.approx([(r["timestamp"] - ordered[0]["timestamp"]) / 1e4 for r in ordered], abs=1e-6)
    assert cell["request_rate"] == pytest.approx(199 / ((ordered[-1]["timestamp"] - ordered[0]["timestamp"]) / 1e4),
                                                 rel=1e-3)
    assert cell["arrival"]["law"] == "trace" and cell["arrival"]["speed"] == 10.0
    # rows sharing their first hash id share that block's text (> 1000 characters), byte for byte; rows whose
    # first ids differ share no more than the blocks' common opening "[<run> block "
    truth = {t["rid"]: t["prompt"][0]["content"] for t in sim.truth_rows()}
    groups: dict[int, list[str]] = {}
    for row, r in zip(ordered, records):
        if row["input_length"] >= BLOCK_TOKENS + TAIL_MIN_TOKENS + 5:
            groups.setdefault(row["hash_ids"][0], []).append(truth[r["request_id"]])
    assert len(groups) == 4 and all(len(texts) > 1 for texts in groups.values())
    assert min(len(os.path.commonprefix(texts)) for texts in groups.values()) > 1000
    firsts = [texts[0] for texts in groups.values()]
    assert max(len(os.path.commonprefix([a, b])) for i, a in enumerate(firsts) for b in firsts[i + 1:]) < 40
    check_reasoning(cell, records, {t["rid"]: t for t in sim.truth_rows()}, 4)
    # SGLang's per-request histograms of accepted drafts: one entry per verify step, as the truth counted them
    truth_steps = {t["rid"]: t["verify_ct"] for t in sim.truth_rows()}
    assert all(sum(r["spec"]["spec_correct_drafts_histogram"]) == truth_steps[r["request_id"]] for r in records)
    assert 1 + sum(p["rate"] for p in cell["accept_by_position"]) == pytest.approx(
        sum(r["completion_tokens"] - 1 for r in records) / sum(truth_steps.values()))
    late = cell["send_lateness_s"]["p99"]
    if late >= 0.05 and machine["max_s"] >= 0.025:
        pytest.skip(f"send lateness p99 {late * 1e3:.0f} ms while this machine held an idle event loop up "
                    f"{machine['max_s'] * 1e3:.0f} ms: all else held; whether the client kept up cannot be told here")
    assert late < 0.05  # 200 requests a second; the done-when's 10 ms, with room for a busy 2-core machine


def check_reasoning(cell: dict, records: list[dict], truth: dict, budget: int) -> None:
    """Each request's reasoning tokens and first reasoning / answer chunk against the simulator's truth."""
    for r in records:
        t = truth[r["request_id"]]
        n = t["reasoning_chunks"]
        assert r["reasoning_tokens"] == sum(t["chunk_tokens"][:n]) == min(budget, r["completion_tokens"])
        assert r["t_first_reasoning_ns"] == r["t_first_token_ns"]  # the answer opens with its reasoning
        if n < len(t["chunk_times_ns"]):  # the answer's own first chunk came after the reasoning's
            assert r["t_first_answer_ns"] >= r["t_first_reasoning_ns"]  # the same read, when one step held both
        else:
            assert r["t_first_answer_ns"] is None  # all of it was reasoning
    f = cell["reasoning"]
    assert f["requests"] == len(records)
    assert f["reasoning_share"] == pytest.approx(sum(r["reasoning_tokens"] for r in records) /
                                                 sum(r["completion_tokens"] for r in records))
    assert f["time_to_first_answer_s"]["mean"] >= f["time_to_first_reasoning_s"]["mean"]
