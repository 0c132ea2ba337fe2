"""`--repeat N` against the simulator: each cell measured N times (every repeat's requests in the JSONL, under
its number), the cell's key figures the mean over the repeats with an interval; the final matrix printed once
and within 120 columns; the run compared with itself names no best (exact equals are tied)."""

from __future__ import annotations

import re

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.names import Phase

pytestmark = pytest.mark.sim


def test_repeat_measures_each_cell_n_times_with_an_interval(sim_factory, tmp_path, cli):
    sim = sim_factory("--speed", "8")
    out = tmp_path / "r.json"
    res = cli("--url", sim.url, "--concurrency", "2", "--contexts", "60", "--max-tokens", "16",
              "--requests-per-cell", "4", "--repeat", "3", "--server-metrics", "off", "--out", str(out))
    assert res.returncode == 0, res.stderr
    (cell,) = read_json(str(out))["cells"]
    per_repeat = cell["repeats"]["values"]["output_tok_s"]
    assert cell["repeats"]["n"] == 3 and len(per_repeat) == 3 and len(set(per_repeat)) > 1
    assert cell["output_tok_s"] == pytest.approx(sum(per_repeat) / 3)
    low, high = cell["intervals"]["output_tok_s"]
    assert low < cell["output_tok_s"] < high and cell["interval_method"]["method"] == "t over repeats"
    records = [r for r in read_jsonl(str(out).replace(".json", ".requests.jsonl")) if r["phase"] == Phase.MEASURE]
    assert sorted(r["repeat"] for r in records) == [0] * 4 + [1] * 4 + [2] * 4
    assert cell["requests"]["ok"] == 12
    assert res.stdout.count("run ") == 1 and max(len(line) for line in res.stdout.splitlines()) <= 120
    assert res.stderr.count("run 3/3") == 1 and "(mean)" in res.stderr
    compared = cli("compare", str(out), str(out))
    within = re.search(r"tied: (\d+) of (\d+) compared figures", compared.stdout)
    assert compared.returncode == 0 and within and within[1] == within[2] != "0", compared.stdout
