"""Length spreads of the synthetic matrix (`--contexts N±P%`, `--max-tokens N±P%`, `--context-dist`): seeded
draws, each prompt exactly its drawn length by the server's count, and the achieved distribution reported."""

from __future__ import annotations

import random

import pytest

from loadgen.config import LengthSpread
from loadgen.errors import UsageError
from loadgen.files import read_json, read_jsonl
from loadgen.metrics.stats import distribution
from loadgen.workload.corpus import seeded_rng
from loadgen.workload.lengths import centres, parse_dist
from tests.conftest import run_loadgen


@pytest.mark.unit
@pytest.mark.parametrize("text, plain, spreads", [
    ("1024±25%,60", "1024,60", {1024: LengthSpread("uniform", 0.25, True)}),
    ("300+-50", "300", {300: LengthSpread("uniform", 50.0)}),
    ("60,1024", "60,1024", {}),
])
def test_spreads_are_parsed(text, plain, spreads):
    assert centres("--contexts", text) == (plain, spreads)


@pytest.mark.unit
@pytest.mark.parametrize("text", ["1024±x", "1024±150%", "1024±-5"])
def test_bad_spreads_are_named(text):
    with pytest.raises(UsageError, match="--contexts"):
        centres("--contexts", text)


@pytest.mark.unit
def test_draws_stay_in_their_range_and_repeat_under_a_seed():
    spread = LengthSpread("uniform", 0.25, True)
    a = spread.draw(random.Random(1), 1024, 2000)
    assert min(a) >= 768 and max(a) <= 1280 and a == spread.draw(random.Random(1), 1024, 2000)
    assert min(a) < 800 and max(a) > 1250  # it spans the range
    centre, normal = parse_dist("--context-dist", "normal:1024:128")
    b = normal.draw(random.Random(2), centre, 4000)
    assert sum(b) / len(b) == pytest.approx(1024, abs=10)
    assert (sum((x - 1024) ** 2 for x in b) / len(b)) ** 0.5 == pytest.approx(128, rel=0.06)


@pytest.mark.sim
def test_each_prompt_is_exactly_its_drawn_length(sim_factory, tmp_path):
    sim = sim_factory("--speed", "20")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "4", "--contexts", "200±25%", "--max-tokens", "24±50%",
                       "--requests-per-cell", "24", "--seed", "7", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    records = sorted(read_jsonl(str(out)[:-5] + ".requests.jsonl"), key=lambda r: r["seq"])
    truth = {t["rid"]: t for t in sim.truth_rows()}
    expected = LengthSpread("uniform", 0.25, True).draw(seeded_rng(7, "lengths", 200, 4, None), 200, 24)
    outputs = LengthSpread("uniform", 0.5, True).draw(seeded_rng(7, "outputs", 200, 4, None), 24, 24)
    assert [r["prompt_tokens"] for r in records] == expected
    assert [truth[r["request_id"]]["prompt_tokens"] for r in records] == expected
    assert [truth[r["request_id"]]["max_tokens"] for r in records] == outputs
    assert [r["completion_tokens"] for r in records] == outputs  # ignore_eos: exactly the drawn length
    (cell,) = read_json(str(out))["cells"]
    assert cell["lengths"]["prompt_tokens"] == distribution(expected, (50, 90)) | \
        {k: v for k, v in cell["lengths"]["prompt_tokens"].items() if k not in ("mean", "p50", "p90")}
    assert cell["lengths"]["output_tokens"]["mean"] == pytest.approx(sum(outputs) / 24)
    assert "achieved lengths (tokens):" in proc.stdout
    assert read_json(str(out))["prompt_sizing"]["context_spreads"] == {"200": "uniform ±25%"}
