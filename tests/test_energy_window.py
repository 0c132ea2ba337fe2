"""A cell's energy cut at exactly its edges: against the simulated GPUs' exact integral over the cell's window,
with an exporter that refreshes on a timer (100 ms for a short cell, 1000 ms for a long one), over real sockets;
the cutting and dating rules on hand-made snapshots."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from loadgen.files import read_json
from loadgen.metrics.energy_window import (
    collection_times,
    energy_after_j,
    energy_before_j,
    refresh_period_ns,
    window_energy_j,
)
from tests.conftest import run_loadgen

MS = 1_000_000
S = 1_000_000_000


@pytest.mark.unit
def test_cut_splits_an_interval_by_power_times_time():
    # steady 100 W: linear interpolation of the counter
    steady = [(0, 0.0, 100.0), (S, 100_000.0, 100.0)]
    assert energy_before_j(steady, S // 4, counter=True) == pytest.approx(25.0)
    assert energy_after_j(steady, S // 4, counter=True) == pytest.approx(75.0)
    # the load steps from 100 W to 300 W at the edge: the counter's 200 J split exactly (50 J before, 150 after)
    step = [(0, 0.0, 100.0), (S, 200_000.0, 300.0)]
    assert energy_before_j(step, S // 2, counter=True) == pytest.approx(50.0)
    # an edge before the first snapshot is extrapolated at its power; a counter restart gives up
    assert energy_before_j(steady, -S // 2, counter=True) == pytest.approx(-50.0)
    assert energy_before_j([(0, 500.0, 100.0), (S, 100.0, 100.0)], S // 2, counter=True) is None
    # the power integral (no counter): the trapezoid's increment, split the same way
    assert energy_before_j([(0, None, 100.0), (S, None, 100.0)], S // 2, counter=False) == pytest.approx(50.0)
    gpu = {"energy_j": 100.0, "energy_method": "counter", "edge_points_head": steady, "edge_points_tail": steady}
    assert window_energy_j(gpu, S // 4, 3 * S // 4) == pytest.approx(50.0)


@pytest.mark.unit
def test_snapshots_are_dated_on_the_exporters_refresh_grid():
    # collections every 100 ms at 0, 100, 200, ... ms; 200 W steady: each collection adds 20 J
    # polled every 20 ms from 5 ms on: each new value first seen up to 20 ms after its collection
    polls = [5 * MS + 20 * MS * k for k in range(16)]
    snaps, last = [], None
    for prev, t in zip([None, *polls], polls):
        collected = (t // (100 * MS)) * 100 * MS
        if collected != last:
            snaps.append([prev, t, 20_000.0 * collected / (100 * MS), 200.0])
            last = collected
    assert refresh_period_ns([snaps]) == pytest.approx(100 * MS, rel=1e-6)
    dates = collection_times(snaps, 100 * MS)
    assert dates == pytest.approx([100 * MS * k for k in range(len(snaps))], abs=10 * MS)
    # one reading a second afterwards (a wide bracket) is dated when it was first seen
    assert collection_times([*snaps, [polls[-1], 2 * S, 400_000.0, 200.0]], 100 * MS)[-1] == 2 * S


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _true_energy_j(port: int, window: dict) -> float:
    url = f"http://127.0.0.1:{port}/truth/energy?start_ns={window['start_ns']}&end_ns={window['end_ns']}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())["total_j"]


@pytest.mark.sim
@pytest.mark.parametrize("collect_ms, requests, cell_s", [(100, 76, 3.0), (1000, 512, 20.0)])
def test_cell_energy_matches_the_exact_integral(collect_ms, requests, cell_s, sim_factory, tmp_path):
    port = _free_port()
    sim = sim_factory("--speed", "4", "--dcgm-port", str(port), "--dcgm-collect-ms", str(collect_ms))
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "32", "--contexts", "60", "--max-tokens", "512",
                       "--requests-per-cell", str(requests), "--server-metrics", "off",
                       "--dcgm", f"http://127.0.0.1:{port}/metrics", "--out", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr
    cell = read_json(str(out))["cells"][0]
    assert cell["duration_s"] == pytest.approx(cell_s, rel=0.5)  # the cell length the bound is stated for
    power = cell["power"]
    assert power["per_gpu"][0]["refresh_period_s"] == pytest.approx(collect_ms / 1000, rel=0.1)
    truth_j = _true_energy_j(port, cell["window_ns"])
    assert power["cell_energy_j"] == pytest.approx(truth_j, rel=0.01)
    assert power["j_per_output_token"] == pytest.approx(power["cell_energy_j"] / cell["output_tokens"])
