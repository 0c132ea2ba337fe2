"""Steps from events: a server that streams one event per token (the simulator's `--per-token-events`, as
llama.cpp's llama-server) has its steps found again by the 1 ms grouping, exactly as its truth logged them;
a server that streams one event per step keeps one step per event."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.metrics.cell import summarize
from loadgen.metrics.steps import STEP_GAP_NS, STEP_GAP_S, step_figures, step_groups
from loadgen.record import CellKey, Record
from tests.conftest import machine_lag, run_loadgen
from tests.faults_util import outputs

US, MS = 1_000, 1_000_000
CELL = CellKey(context_tokens=60, concurrency=1)


def _rec(gaps: list[int], completion: int, **kw) -> Record:
    return Record(run_id="r", cell=CELL, seq=0, chunks=len(gaps) + 1, chunk_gaps_ns=gaps,
                  completion_tokens=completion, chunk_tokens=[1] * (len(gaps) + 1), **kw)


@pytest.mark.unit
@pytest.mark.parametrize(("gaps", "events", "step_gaps"), [
    ([], [1], []),
    ([0, 20 * US, 80 * US], [4], []),  # one read, then back-to-back events: one step
    ([10 * MS, 20 * US, 20 * US, 8 * MS, 0], [1, 3, 2], [10 * MS, 8 * MS + 40 * US]),  # from step start to start
    ([999 * US, 1 * MS], [2, 1], [1_999 * US]),  # the threshold itself begins a step
    ([5 * MS, 5 * MS], [1, 1, 1], [5 * MS, 5 * MS]),
])
def test_step_groups(gaps, events, step_gaps):
    assert step_groups(_rec(gaps, sum(events))) == (events, step_gaps)


@pytest.mark.unit
def test_a_record_without_content_has_no_step():
    assert step_groups(Record(run_id="r", cell=CELL, seq=0)) == ([], [])
    figures = step_figures([])
    assert figures["steps_per_request_mean"] is None and figures["step_itl_s"]["samples"] == 0


@pytest.mark.unit
def test_step_figures_of_a_cell():
    recs = [_rec([10 * MS, 20 * US, 20 * US, 8 * MS, 0], 6), _rec([6 * MS], 2)]
    figures = summarize(recs)["steps"]
    assert figures["threshold_s"] == STEP_GAP_S
    assert figures["steps_per_request_mean"] == 2.5
    assert figures["events_per_step_mean"] == 8 / 5
    assert figures["tokens_per_step"] == 8 / 3  # Σ completion / Σ (steps − 1)
    assert figures["step_itl_s"]["samples"] == 3
    assert figures["step_itl_s"]["p50"] == pytest.approx(0.00804)
    assert figures["step_itl_s"]["mean"] == pytest.approx((0.010 + 0.00804 + 0.006) / 3)


def _truth_steps(row: dict) -> tuple[list[int], list[int]]:
    """(entries, tokens) per step of a truth row, its entries grouped by the same threshold on the server's own
    write times: a simulator held up past a step writes two steps back to back, and they are one step to any
    client."""
    entries, tokens = [1], [row["chunk_tokens"][0]]
    for prev, t, k in zip(row["chunk_times_ns"], row["chunk_times_ns"][1:], row["chunk_tokens"][1:]):
        if t - prev >= STEP_GAP_NS:
            entries.append(1)
            tokens.append(k)
        else:
            entries[-1] += 1
            tokens[-1] += k
    return entries, tokens


@pytest.mark.sim
@pytest.mark.parametrize("per_token", [True, False], ids=["per-token-events", "event-per-step"])
def test_steps_match_the_simulators_truth(sim_factory, tmp_path: Path, per_token):
    """Every request: its steps are the truth's steps (the prefill's, then one per verify step), each with the
    truth's tokens; with one event per step, one step per event. Steps of ≥ 25 ms (--speed 0.5) keep the
    grouping clear of ordinary delays; a client held up for a whole step reads two steps at once, which only a
    machine that stalls idle event loops that long explains (then the test skips, saying so)."""
    sim = sim_factory("--speed", "0.5", *(["--per-token-events"] if per_token else []))
    out = tmp_path / "r.json"
    with machine_lag() as machine:
        p = run_loadgen("--url", sim.url, "--concurrency", "1,4", "--contexts", "60", "--max-tokens", "24",
                        "--requests-per-cell", "8", "--warmup", "0", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    doc, rows = outputs(out)
    truth = {row["rid"]: row for row in sim.truth_rows()}
    records = [Record.from_dict(r) for r in rows]
    assert records and all(r.ok for r in records)
    late = []
    for rec in records:
        row = truth[rec.request_id]
        assert len(row["chunk_tokens"]) == row["verify_ct"] + 1
        entries, tokens = _truth_steps(row)
        events, _ = step_groups(rec)
        if events != (tokens if per_token else entries):
            late.append((rec.request_id, events, row["chunk_tokens"]))
    for cell in doc["cells"]:
        mine = [r for r in records if r.cell.concurrency == cell["concurrency"]]
        steps = sum(len(step_groups(r)[0]) - 1 for r in mine)
        assert cell["steps"]["tokens_per_step"] == pytest.approx(sum(r.completion_tokens for r in mine) / steps)
        assert (cell["steps"]["events_per_step_mean"] > 1.5) == per_token
        if not late:  # the truth's steps as a client sees them: two the simulator wrote back to back are one
            rows_ = [truth[r.request_id] for r in mine]
            assert steps == sum(len(_truth_steps(t)[0]) - 1 for t in rows_)
            assert steps <= sum(t["verify_ct"] for t in rows_)
    if late:
        assert machine["max_s"] >= STEP_GAP_S * 5, (late[:3], machine)
        pytest.skip(f"{len(late)} requests read two steps at once while this machine held an idle event loop "
                    f"{machine['max_s'] * 1e3:.0f} ms: {late[:2]}")
