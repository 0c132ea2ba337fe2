"""The steady window of closed-loop cells: all C slots busy, against the simulator's truth, in one process and
over worker processes; the whole-window figures kept beside it; the window's rule on hand-made timelines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.config import default_requests_per_cell
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.steady import steady_window_ns, token_arrivals
from loadgen.record import CellKey, Record
from tests.conftest import machine_lag, run_loadgen
from tests.faults_util import wait_truth

C = 128
TOLERANCE = 0.005  # achieved concurrency within 0.5 % of C
T0 = 1_000  # t_sent_ns 0 means "never sent"


def _rec(seq: int, sent: int, end: int, c: int = 2) -> Record:
    return Record(run_id="r", cell=CellKey(60, c), seq=seq, t_sent_ns=T0 + sent, t_end_ns=T0 + end)


@pytest.mark.unit
@pytest.mark.parametrize("spans, window", [
    # two slots: both busy from 1 to 10, then slot 2 finds no more work at 10 (the last send was at 9)
    ([(0, 10), (1, 9), (9, 12)], (1, 10)),
    # a slot refills at the very moment its request ended: the end comes first, the count never exceeds C
    ([(0, 5), (0, 4), (4, 8), (5, 7)], (0, 7)),
    # never two requests in flight at once: no steady window
    ([(0, 4), (4, 8)], None),
])
def test_window_rule(spans, window):
    got = steady_window_ns([_rec(i, s, e) for i, (s, e) in enumerate(spans)], 2)
    assert got == (window and (T0 + window[0], T0 + window[1]))


def _walked(spans: list[tuple[int, int]], slots: int) -> tuple[int, int] | None:
    """The window's rule read off the events one by one: (time, +1 a send / −1 an end), ends first at a tie."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    count, full = 0, []
    for i, (_, delta) in enumerate(events):
        count += delta
        if count >= slots:
            full.append(i)
    if not full:
        return None
    end = next((at for at, delta in events[full[-1] + 1:] if delta < 0), None)
    start = events[full[0]][0]
    return (start, end) if end is not None and end > start else None


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), min_size=1, max_size=30), st.integers(1, 6))
def test_window_rule_against_the_event_walk(spans, slots):
    # small times: many ties between sends and ends, where the order of the walk matters
    spans = [(s, s + d) for s, d in spans]
    got = steady_window_ns([_rec(i, s, e) for i, (s, e) in enumerate(spans)], slots)
    want = _walked([(T0 + s, T0 + e) for s, e in spans], slots)
    assert got == want


@pytest.mark.unit
def test_token_arrivals_follow_the_chunks():
    r = Record(run_id="r", cell=CellKey(60, 1), seq=0, t_first_token_ns=100, chunks=3, completion_tokens=7,
               chunk_tokens=[1, 4, 2], chunk_gaps_ns=[10, 30])
    assert token_arrivals(r) == [(100, 1), (110, 4), (140, 2)]
    r.chunk_tokens = None  # only the final total known: spread evenly over the chunks
    assert [n for _, n in token_arrivals(r)] == pytest.approx([7 / 3] * 3)


def _truth_figures(truth: dict, records: list[dict], start: int, end: int) -> tuple[float, float, int]:
    """Over [start, end], from the simulator's own stamps: (concurrency the server saw, from body received to
    last byte written; output tok/s, from each content chunk's write time; requests that arrived in it)."""
    busy_ns = tokens = arrived = 0
    for r in records:
        t = truth[r["request_id"]]
        busy_ns += max(0, min(t["t_end_ns"], end) - max(t["t_arrival_ns"], start))
        tokens += sum(n for at, n in zip(t["chunk_times_ns"], t["chunk_tokens"]) if start < at <= end)
        arrived += start < t["t_arrival_ns"] <= end
    return busy_ns / (end - start), tokens / ((end - start) / 1e9), arrived


@pytest.mark.sim
@pytest.mark.parametrize("workers", ["1", "2"])
def test_steady_window_holds_c_requests_against_the_truth(workers, sim_factory, tmp_path):
    sim = sim_factory("--speed", "4")
    out = tmp_path / "r.json"
    with machine_lag() as lag:
        proc = run_loadgen("--url", sim.url, "--concurrency", str(C), "--contexts", "60", "--max-tokens", "512",
                           "--server-metrics", "off", "--workers", workers, "--out", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr
    cell = read_json(str(out))["cells"][0]
    records = [r for r in read_jsonl(str(out)[:-5] + ".requests.jsonl") if r["phase"] == "measure"]
    assert len(records) == default_requests_per_cell(C)
    steady = cell["steady"]
    assert steady["achieved_concurrency"] == pytest.approx(C, rel=TOLERANCE)
    ids = {r["request_id"] for r in records}
    truth = wait_truth(sim, lambda rows: ids <= {t["rid"] for t in rows})
    start, end = steady["start_ns"], steady["end_ns"]
    true_concurrency, true_tok_s, refills = _truth_figures(truth, records, start, end)
    # The server held C requests all through the window but for each slot's refill: the client noticing an
    # end and the next request reaching the server, each at most as late as this machine woke an idle event
    # loop during the run (measured beside it). On a quiet machine that is ~0.2 % of C.
    refill_allowance_s = refills * 2 * (lag["max_s"] + 0.002)
    assert (C - true_concurrency) * (end - start) / 1e9 <= refill_allowance_s, (true_concurrency, lag)
    assert true_concurrency <= C
    # tokens counted where the client saw them arrive, against where the server wrote them
    assert steady["output_tok_s"] == pytest.approx(true_tok_s, rel=0.01)
    assert steady["duration_s"] == pytest.approx((steady["end_ns"] - steady["start_ns"]) / 1e9)
    # the default requests per cell leave a steady window at least twice the ramps around it
    assert steady["duration_s"] >= 2 * steady["ramp_s"], steady
    assert 0 < steady["ok"] == steady["requests"] < len(records)
    # the whole-window figures are kept: they include the ramps, so they read lower
    assert cell["achieved_concurrency"] < steady["achieved_concurrency"]
    assert cell["duration_s"] == pytest.approx(steady["duration_s"] + steady["ramp_s"])
