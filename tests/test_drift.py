"""The drift verdict on a control cell measured twice (`metrics.drift.judge_drift`): tables of real cells
built from records by the results' own builder, so the intervals judged are those a run stores."""

from __future__ import annotations

import math
import random

import pytest

from loadgen.metrics.drift import DRIFT_FACTOR, MIN_CHANGE, Drift, change_factor, judge_drift, moved
from loadgen.names import Outcome
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import build_cell

pytestmark = pytest.mark.unit

NS = 1_000_000_000
KEY = CellKey(1024, 4)


def _cell(tok_s_per_request: float, ttft_s: float, jitter: float = 0.0, requests: int = 32, seed: int = 1):
    """A closed-loop cell of 4 slots, each request 64 tokens at `tok_s_per_request` after `ttft_s`, each time
    spread by ± `jitter` (a fraction, uniform)."""
    rng = random.Random(seed)
    slots = [0.0] * KEY.concurrency
    records = []
    for seq in range(requests):
        slot = seq % KEY.concurrency
        first = ttft_s * (1 + rng.uniform(-jitter, jitter))
        decode = 64 / tok_s_per_request * (1 + rng.uniform(-jitter, jitter))
        sent = slots[slot]
        slots[slot] = sent + first + decode
        records.append(Record("run-a", KEY, seq, t_sent_ns=int(sent * NS), t_first_token_ns=int((sent + first) * NS),
                              t_end_ns=int((sent + first + decode) * NS), completion_tokens=64, chunks=64,
                              prompt_tokens=1024))
    return build_cell(KEY, records)


CASES = [  # (name, first, again, drifted, way)
    ("same cell twice", _cell(100, 0.2, 0.05, seed=1), _cell(100, 0.2, 0.05, seed=1), False, None),
    # every time 8× as long (the same spread, scaled): exactly 8× fewer tokens a second
    ("8x slower", _cell(100, 0.2, 0.05, seed=1), _cell(12.5, 1.6, 0.05, seed=1), True, "8.0× slower"),
    *((f"noisy but same, seed {s}", _cell(100, 0.2, 0.5, seed=1), _cell(100, 0.2, 0.5, seed=s), False, None)
      for s in range(2, 8)),
    ("3x faster", _cell(50, 0.6, 0.05, seed=1), _cell(150, 0.2, 0.05, seed=1), True, "3.0× faster"),
]


@pytest.mark.parametrize(("name", "first", "again", "drifted", "way"), CASES, ids=[c[0] for c in CASES])
def test_drift_is_judged_beyond_noise_and_says_its_direction(name, first, again, drifted, way):
    found = judge_drift(first, again)
    assert found.drifted is drifted, found.sentence
    assert found.factor == pytest.approx(first.throughput.output_tok_s / again.throughput.output_tok_s)
    if way:
        assert f"the server got {way} during the run: ctx 1024 c=4 " in found.sentence
        assert found.sentence.endswith(f"{first.throughput.output_tok_s:.1f} → "
                                       f"{again.throughput.output_tok_s:.1f} tok/s")
        assert "output_tok_s" in found.moved
    else:
        assert found.sentence.startswith("no drift: ") and found.moved == []


def test_a_change_beyond_noise_but_below_the_minimum_is_not_drift():
    # 10 % slower with no jitter: the intervals are single points and disjoint, the change below MIN_CHANGE
    first, again = _cell(100, 0.2), _cell(90, 0.2)
    assert first.noise.intervals["output_tok_s"][1] < again.noise.intervals["output_tok_s"][0] or \
        again.noise.intervals["output_tok_s"][1] < first.noise.intervals["output_tok_s"][0]
    assert not judge_drift(first, again).drifted
    assert MIN_CHANGE == 0.20


# a clean server's cold first cell measured again on a busy 2-core host read up to 1.6× either way: beyond
# noise, noted, and no drift; 2× or more is one
BELOW = [("1.6x slower", _cell(100, 0.2, 0.05, seed=1), _cell(62.5, 0.32, 0.05, seed=2), "1.60×"),
         ("1.4x faster", _cell(100, 0.2, 0.05, seed=1), _cell(140, 0.2 / 1.4, 0.05, seed=2), "1.40×"),
         ("1.9x slower", _cell(100, 0.2, 0.05, seed=1), _cell(100 / 1.9, 0.38, 0.05, seed=2), "1.90×")]


@pytest.mark.parametrize(("name", "first", "again", "times"), BELOW, ids=[c[0] for c in BELOW])
def test_a_move_beyond_noise_below_2x_is_a_note_not_a_drift(name, first, again, times):
    found = judge_drift(first, again)
    assert not found.drifted and found.moved == ["output_tok_s", "ttft_s.p50"] and DRIFT_FACTOR == 2
    ttft = first.latency.ttft_s["p50"], again.latency.ttft_s["p50"]
    moved_by = max(change_factor(first.throughput.output_tok_s, again.throughput.output_tok_s), change_factor(*ttft))
    assert found.sentence.startswith(f"no drift (moved {moved_by:.2f}×, < 2×): ctx 1024 c=4 "), found.sentence
    assert abs(moved_by - float(times[:-1])) < 0.06 and "within noise" not in found.sentence
    assert "slower" not in found.sentence and "faster" not in found.sentence
    assert len("drift check: " + found.sentence) <= 120
    assert Drift.from_json(found.to_json()) == found


def test_the_failing_verdict_starts_at_2x_of_either_figure():
    first = _cell(100, 0.2, 0.05, seed=1)
    assert judge_drift(first, _cell(100 / 2.1, 0.2 * 2.1, 0.05, seed=2)).drifted
    # TTFT 2.5× with output tok/s 1.1× lower: the TTFT alone fails it
    ttft = judge_drift(_cell(10, 0.2, 0.05, seed=1), _cell(10, 0.5, 0.05, seed=1))
    assert ttft.drifted and ttft.sentence.startswith("the server's TTFT p50 200 ms → 500 ms changed")
    assert judge_drift(first, _cell(100 / 2.1, 0.2 * 2.1, 0.05, seed=2), drift_factor=3).drifted is False
    assert change_factor(2, 1) == change_factor(1, 2) == 2 and change_factor(1, 0) == math.inf
    assert change_factor(None, 1) == 1


def test_ttft_alone_can_drift_and_is_named():
    # 6.4 s of decode a request: a TTFT of 0.2 → 0.6 s moves output tok/s by 6 %, below the minimum
    found = judge_drift(_cell(10, 0.2, 0.05, seed=1), _cell(10, 0.6, 0.05, seed=1))
    assert found.drifted and found.moved == ["ttft_s.p50"]
    assert found.sentence == "the server's TTFT p50 200 ms → 600 ms changed during the run, beyond noise: ctx 1024 c=4"


def test_moved_needs_both_rules_and_counts_a_missing_interval_as_disjoint():
    assert moved(100, 50, [90, 110], [45, 55]) and not moved(100, 50, [40, 110], [45, 55])
    assert moved(100, 50, None, None) and not moved(100, 90, None, None)
    assert not moved(None, 50, None, None) and not moved(100, None, None, None)
    assert not moved(0.004, 0.008, None, None, min_abs=0.010) and moved(0.004, 0.020, None, None, min_abs=0.010)


def test_a_control_that_produced_nothing_again_is_infinitely_slower_and_round_trips():
    first = _cell(100, 0.2, 0.05)
    again = build_cell(KEY, [Record("run-a", KEY, i, t_sent_ns=0, t_end_ns=NS, outcome=Outcome.TIMEOUT, error="timeout")
                             for i in range(8)])
    found = judge_drift(first, again)
    assert found.drifted and math.isinf(found.factor) and "stopped producing tokens" in found.sentence
    back = Drift.from_json(found.to_json())
    assert back == found and found.to_json()["factor"] is None


def test_the_verdict_round_trips_through_json_with_both_measurements():
    found = judge_drift(_cell(100, 0.2, 0.05, seed=1), _cell(12.5, 1.6, 0.05, seed=2))
    data = found.to_json()
    assert data["cell"] == {"context_tokens": 1024, "concurrency": 4}
    assert data["first"]["output_tok_s_interval"] and data["again"]["ttft_p50_s"] == pytest.approx(1.6, rel=0.1)
    assert Drift.from_json(data) == found


def test_a_control_too_short_to_judge_is_not_judged():
    # 4 requests: fewer than MIN_OK_REQUESTS, however far apart the two measurements are
    found = judge_drift(_cell(100, 0.2, requests=4), _cell(12.5, 1.6, requests=4))
    assert not found.drifted and found.sentence.startswith("drift not judged: the control ctx 1024 c=4 is too short")
