"""Requests closed on purpose (`--cancel-fraction`): which are chosen, how a stream is closed after N tokens or
S seconds, how they are counted (apart: never failed, the cell stays ok), and, against the simulator, that the
server saw those streams closed early and stopped generating them."""

from __future__ import annotations

import asyncio
import math

import orjson
import pytest

from loadgen.client.cancel import CancellingSender, chosen
from loadgen.client.recorder import END, MORE, STOP, StreamRecorder
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.cancel import cancellation_figures
from loadgen.metrics.counts import request_counts
from loadgen.names import Outcome, Phase
from loadgen.record import CellKey, Record
from loadgen.report.table import ABANDONED_LEGEND, footnote
from loadgen.report.text_table import ok_failed
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_status import failed_fraction
from loadgen.results.repeats import combine_repeats
from tests.conftest import run_loadgen

CELL = CellKey(60, 4)


def event(completion_tokens: int, text: str = "x") -> bytes:
    obj = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
           "usage": {"prompt_tokens": 60, "completion_tokens": completion_tokens}}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


@pytest.mark.unit
@pytest.mark.parametrize("fraction", [0.25, 0.1, 0.5, 0.37])
def test_the_chosen_share_is_exact_in_every_run_of_requests(fraction):
    for phase in (0.0, 0.31, 0.99):
        picks = [chosen(s, fraction, phase) for s in range(1000)]
        assert sum(picks) in (int(1000 * fraction), int(1000 * fraction) + 1)
        for start in (0, 17, 400):  # any 40 consecutive requests hold ⌊40·F⌋ or ⌈40·F⌉ of them
            assert sum(picks[start:start + 40]) in (math.floor(40 * fraction), math.ceil(40 * fraction))


@pytest.mark.unit
def test_the_recorder_stops_at_the_token_limit_and_records_abandoned():
    rec = Record("r", CELL, 3, abandon_after_tokens=5)
    recorder = StreamRecorder(rec, "openai-chat")
    assert recorder.feed(event(1) + event(4), 1) == MORE  # 4 tokens: read on
    assert recorder.feed(event(7), 2) == STOP  # 7 ≥ 5: the sender closes the stream
    recorder.finish(None, None)
    assert (rec.outcome, rec.completion_tokens, rec.chunks) == (Outcome.ABANDONED, 7, 3)
    assert rec.error == "closed by the client after 7 tokens (--cancel-after-tokens)"
    plain = StreamRecorder(Record("r", CELL, 4), "openai-chat")  # no limit: the same stream is read to its end
    assert plain.feed(event(1) + event(4) + event(7), 1) == MORE and plain.feed(b"data: [DONE]\n\n", 2) == END


@pytest.mark.unit
def test_a_chosen_request_is_closed_after_its_seconds():
    async def slow(body, rec):  # a sender whose answer takes 0.2 s; cancelled, it records as the senders do
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            rec.outcome, rec.t_end_ns = Outcome.CANCELLED, 1
            raise
        rec.outcome = Outcome.OK
        return rec

    async def main():
        send = CancellingSender(slow, fraction=0.5, phase=0.0, after_s=0.02)
        picked = next(s for s in range(4) if chosen(s, 0.5, 0.0))
        other = next(s for s in range(4) if not chosen(s, 0.5, 0.0))
        closed = await send({}, Record("r", CELL, picked))
        warm = await send({}, Record("r", CELL, picked, phase=Phase.WARMUP))  # warmup requests are never chosen
        kept = await asyncio.wait_for(send({}, Record("r", CELL, other)), 5)
        return closed, warm, kept

    closed, warm, kept = asyncio.run(main())
    assert closed.outcome == Outcome.ABANDONED and "0.02 s after the send" in closed.error
    assert warm.outcome == kept.outcome == Outcome.OK


def records(ok: int, abandoned: int, failed: int = 0) -> list[Record]:
    out = []
    for i in range(ok + abandoned + failed):
        outcome = Outcome.OK if i < ok else Outcome.ABANDONED if i < ok + abandoned else Outcome.HTTP_ERROR
        out.append(Record("r", CELL, i, t_sent_ns=10**9 * i, t_first_token_ns=10**9 * i + 10**7,
                          t_end_ns=10**9 * i + (2 * 10**8 if outcome == Outcome.ABANDONED else 5 * 10**8),
                          outcome=outcome, prompt_tokens=60, completion_tokens=(10 + i % 3) if outcome != Outcome.HTTP_ERROR else None,
                          chunks=4))
    return out


@pytest.mark.unit
def test_abandoned_requests_are_counted_apart_and_never_fail_the_cell():
    recs = records(ok=30, abandoned=10)
    assert request_counts(recs) == {
        "ok": 30, "failed": 0, "cancelled": 0, "abandoned": 10, "by_outcome": {"ok": 30, "abandoned": 10}}
    figures = cancellation_figures(recs)
    gone = recs[30:]
    assert figures["abandoned"] == 10 and figures["abandoned_fraction"] == 0.25
    assert figures["tokens_before_close"]["mean"] == pytest.approx(sum(r.completion_tokens for r in gone) / 10)
    assert figures["close_after_s"] == {"mean": pytest.approx(0.2), "p50": pytest.approx(0.2),
                                        "max": pytest.approx(0.2)}
    cell = build_cell(CELL, recs, max_failed_fraction=0.01)
    assert cell.status == "ok" and cell.requests.failed_fraction == 0.0
    assert ok_failed(cell) == "30/0+10a" and ABANDONED_LEGEND in footnote([cell])
    assert "10 of 40 abandoned on purpose (--cancel-fraction)" in cell.notes
    assert cancellation_figures(records(ok=3, abandoned=0)) is None
    # --repeat 2: counted over both repeats, still apart
    both = combine_repeats([cell, build_cell(CELL, records(ok=20, abandoned=5))])
    assert (both.requests.requests["abandoned"], both.requests.requests["failed"], both.status) == (15, 0, "ok")
    # a real failure beside them is judged against every scheduled request: 1 of 41
    assert failed_fraction(build_cell(CELL, records(30, 10, 1))) == pytest.approx(1 / 41)


@pytest.mark.sim
def test_a_quarter_closed_after_tokens_the_server_stops_them(sim_factory, tmp_path):
    # the same run shows --shared-prefix against the simulator's prefix cache (one run for both: test time).
    # --speed 2: the 40 tokens after the close take ~85 ms to generate, longer than a busy machine takes to
    # close; at --speed 20 (~8 ms) a late close let the engine finish a stream before it saw the reset
    sim = sim_factory("--speed", "2", "--cache-report")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "8", "--contexts", "100", "--max-tokens", "48",
                       "--requests-per-cell", "80", "--cancel-fraction", "0.25", "--cancel-after-tokens", "8",
                       "--shared-prefix", "2:48", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (cell,) = read_json(str(out))["cells"]
    recs = read_jsonl(str(out).replace(".json", ".requests.jsonl"))
    gone = [r for r in recs if r["outcome"] == "abandoned"]
    assert 0.20 <= len(gone) / len(recs) <= 0.30
    assert cell["status"] == "ok" and cell["requests"]["failed"] == 0
    assert cell["requests"]["abandoned"] == cell["cancellation"]["abandoned"] == len(gone)
    assert all(8 <= r["completion_tokens"] < 48 for r in gone)
    # the server noticed each closed stream and stopped generating it: its truth and its counter say so
    truth = {t["rid"]: t for t in sim.truth_rows()}
    for r in gone:
        t = truth[r["request_id"]]
        assert t["outcome"] == "client_disconnected" and t["completion_tokens"] < t["max_tokens"]
    assert {truth[r["request_id"]]["outcome"] for r in recs if r["outcome"] == "ok"} == {"ok"}
    assert cell["telemetry"]["server_metrics"]["aborted_requests"] == len(gone)
    assert cell["output_tokens"] == sum(r["completion_tokens"] for r in recs if r["outcome"] == "ok")
    ok = [r for r in recs if r["outcome"] == "ok"]
    assert {r["prompt_tokens"] for r in ok} == {100}
    shared = cell["shared_prefix"]
    assert shared["cacheable_tokens"] == 48 * sum(r["seq"] >= 2 for r in ok)
    assert shared["cached_tokens"] == sum(truth[r["request_id"]]["cached_tokens"] for r in ok)
    assert 0.9 <= shared["cached_of_cacheable"] <= 1.2  # whole 16-token pages; the template's opening too
