"""One simulator default: `loadgen sim` and the built-in simulator of a run (`--sim-speed`, `--sim-budget`,
`--sim-topk`) start alike, so the same cell measures the same tok/s against either."""

from __future__ import annotations

import pytest

from loadgen.cli.run_config import config_from_args
from loadgen.cli.run_options import run_parser
from loadgen.cli.sim_options import sim_parser
from loadgen.files import read_json
from tests.conftest import run_loadgen

CELL = ("--concurrency", "4", "--contexts", "60", "--max-tokens", "256", "--requests-per-cell", "8",
        "--warmup", "0", "--server-metrics", "off")


@pytest.mark.unit
def test_the_built_in_simulator_starts_with_loadgen_sims_own_defaults():
    sim = sim_parser().parse_args([])
    args = config_from_args(run_parser().parse_args(["--out", "x.json"])).sim_args
    assert sim_parser().parse_args(args) == sim
    assert (sim.speed, sim.budget, sim.topk) == (4.0, 8, 4)


@pytest.mark.sim
def test_the_same_cell_gives_the_same_tok_s_against_either_simulator(sim_factory, tmp_path):
    sim = sim_factory(pin_speed=False, fresh=True)  # `loadgen sim` with its defaults, started as the built-in one
    figures = []
    for name, url in (("builtin", ()), ("sim", ("--url", sim.url))):
        run = run_loadgen(*url, *CELL, "--out", str(tmp_path / f"{name}.json"))
        assert run.returncode == 0, run.stderr
        cell, = read_json(str(tmp_path / f"{name}.json"))["cells"]
        figures.append(cell["output_tok_s"])
    builtin, served = figures
    assert served == pytest.approx(builtin, rel=0.10), figures
