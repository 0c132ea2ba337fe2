"""The bottleneck verdict end to end against a reference dcgm-exporter that is not the simulator
(tests/reference_dcgm.py): loadgen against the simulator's API with `--dcgm` on the reference, whose own
served values are the ground truth.

- a host-bound server (GPU busy 12 % and 22 % in alternate collections: 17 %): concurrency 16 and 64 say
  server_host, utilization within 5 points of what the exporter served over each cell's window;
- a server held at its 400 W limit (power-cap reason in 8 of 10 collections): gpu_power_cap, time at the
  limit > 50 % and within 0.1 of what was served;
- a busy server with DRAM 80 % active and the tensor pipe 12 %: gpu_memory_bandwidth.
"""

from __future__ import annotations

import json

import pytest

from tests.reference_dcgm import ReferenceProcess

pytestmark = pytest.mark.sim
# sampled twice per collection of the reference (every 0.1 s), so the figures of a 1 s cell are not aliased
RUN = ("--contexts", "60", "--max-tokens", "24", "--requests-per-cell", "64", "--telemetry-interval", "0.05")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    from tests.conftest import start_sim
    handle = start_sim(tmp_path_factory.mktemp("sim"))
    yield handle
    handle.stop()


def verdict(cell: dict) -> tuple[str, str]:
    """The GPU-side verdict: the cell's, or, where the client fell behind on this busy machine (a verdict of its
    own, checked in test_bottleneck.py), what the GPU figures alone said."""
    if cell["bottleneck"] == "client":
        return tuple(cell["gpu_bottleneck"].split(": ", 1))
    return cell["bottleneck"], cell["bottleneck_evidence"]


def run(cli, sim, tmp_path, scenario: str, concurrency: str, *more: str):
    out = tmp_path / "run.json"
    with ReferenceProcess(scenario) as ref:
        res = cli("--url", sim.url, "--dcgm", ref.url, "--concurrency", concurrency, *RUN, *more, "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(out.read_text())["cells"], ref, res


def cells(cli, sim, tmp_path, scenario: str, concurrency: str) -> tuple[list[dict], ReferenceProcess]:
    found, ref, _ = run(cli, sim, tmp_path, scenario, concurrency)
    return found, ref


def test_host_bound_server_is_server_host_at_16_and_64(cli, sim, tmp_path):
    found, ref = cells(cli, sim, tmp_path, "host_bound", "16,64")
    for cell in found:
        window = cell["window_ns"]
        truth = ref.served_mean("DCGM_FI_DEV_GPU_UTIL", window["start_ns"], window["end_ns"])
        util = cell["gpu_activity"]["total"]["utilization_percent"]
        found_verdict, evidence = verdict(cell)
        assert found_verdict == "server_host", evidence
        assert abs(util - truth) <= 5, (cell["concurrency"], util, truth)
        assert f"with {cell['achieved_concurrency']:.0f} requests in flight" in evidence
        assert "sm_clock_fraction" in cell["gpu_activity"]["unavailable"]  # no DCGM_FI_DEV_MAX_SM_CLOCK served
    assert [c["concurrency"] for c in found] == [16, 64]


def test_power_capped_server_is_gpu_power_cap(cli, sim, tmp_path):
    (cell,), ref = cells(cli, sim, tmp_path, "power_capped", "16")
    window = cell["window_ns"]
    truth = ref.served_mean("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", window["start_ns"], window["end_ns"]) / 0x4
    at_cap = cell["gpu_activity"]["total"]["power_cap_fraction"]
    found_verdict, evidence = verdict(cell)
    assert found_verdict == "gpu_power_cap", evidence
    assert at_cap > 0.5 and abs(at_cap - truth) <= 0.1, (at_cap, truth)
    assert evidence.startswith("at the 400 W power limit")


def test_memory_bound_server_is_gpu_memory_bandwidth(cli, sim, tmp_path):
    (cell,), _ = cells(cli, sim, tmp_path, "memory_bound", "16")
    found_verdict, evidence = verdict(cell)
    assert found_verdict == "gpu_memory_bandwidth", evidence
    assert evidence.startswith("DRAM 80 % active, tensor pipe 12 %")


def test_an_exporter_of_power_alone_is_said_once_at_the_start(cli, sim, tmp_path):
    found, _, res = run(cli, sim, tmp_path, "power_only", "4,8", "--requests-per-cell", "16")
    assert res.stderr.count("serves none of the GPU activity fields") == 1
    assert res.stderr.index("serves none of the GPU activity fields") < res.stderr.index("target ")  # before load
    for cell in found:
        assert "gpu_activity" not in cell and cell["power"]["mean_w_total"] > 0
        assert cell["bottleneck"] in ("unknown", "client")
