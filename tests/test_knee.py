"""The knee: growth per doubling over uneven concurrency steps, the first step under 10 %, none within the
range, and the words the summary, compare and the report print."""

import pytest

from loadgen.metrics.knee import growth_per_doubling, knee, knees
from loadgen.report.knee_text import knee_phrase, knee_points, knee_summary
from tests.cells import typed

pytestmark = pytest.mark.unit


def test_growth_per_doubling_is_like_for_like_over_uneven_steps():
    assert growth_per_doubling(1, 100, 2, 190) == pytest.approx(0.9)
    assert growth_per_doubling(1, 100, 32, 3200) == pytest.approx(1.0)  # 32× over 5 doublings: 2× each
    assert growth_per_doubling(32, 1000, 32, 1000) is None and growth_per_doubling(1, 0, 2, 5) is None


def test_first_step_under_ten_percent_is_the_knee():
    # the H200 llama-server sweep of issue 24: flat from 32 on (1335 → 1211 → 1136 tok/s)
    found = knee([(1, 338.0), (32, 1335.0), (64, 1211.0), (128, 1136.0)])
    assert found["knee"] == 32 and found["growth"][0][2] == pytest.approx((1335 / 338) ** (1 / 5) - 1)
    assert knee_phrase(found) == "32 (32→64: -9.3% per doubling)"
    assert knee([(1, 100.0), (2, 109.0), (4, 150.0)])["knee"] == 1  # 9 % < 10 %: the first such step wins


def test_no_knee_within_the_range():
    found = knee([(1, 100.0), (2, 150.0), (4, 200.0)])
    assert found["knee"] is None and knee_phrase(found) == "none up to 4 (still +33.3% per doubling)"


def test_knees_per_prompt_length_from_usable_closed_loop_cells():
    raw = [{"context_tokens": 60, "concurrency": c, "output_tok_s": t, "status": "ok"}
           for c, t in ((1, 100.0), (2, 105.0))]
    raw += [{"context_tokens": 60, "concurrency": 4, "output_tok_s": 1.0, "status": "failed"},
            {"context_tokens": 60, "concurrency": 0, "request_rate": 5.0, "output_tok_s": 9.0, "status": "ok"},
            {"context_tokens": 1024, "concurrency": 1, "output_tok_s": 50.0, "status": "ok"}]
    cells = [typed(c) for c in raw]
    assert list(knees(knee_points(cells))) == [60]  # 1024 has one concurrency only
    assert knee_summary(cells, "b8") == "knee (output tok/s grows < 10% per doubling past it): b8: ctx 60: 1 (1→2: +5.0% per doubling)"
    assert knee_summary(cells[:1]) is None
    many = [typed(dict(c, context_tokens=ctx)) for ctx in (60, 128, 256, 512, 1024, 2048) for c in raw[:2]]
    assert all(len(line) <= 120 for line in knee_summary(many).splitlines())  # wrapped to fit a terminal
