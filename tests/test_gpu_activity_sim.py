"""The simulator's GPUs serve every activity field, so each GPU verdict can be checked against what they were
told to do: a host-bound server (busy 17 %), one held at a 400 W limit, and a busy memory-bound one. Readings
are folded as the DCGM source folds them (parse_dcgm → GpuActivityStats), at times given by hand."""

import pytest

from loadgen.metrics.bottleneck import gpu_bottleneck
from loadgen.metrics.gpu_activity import GpuActivityStats
from loadgen.metrics.gpu_window import cell_activity
from loadgen.names import Bottleneck
from loadgen.sim.gpus import SimulatedGpus
from loadgen.telemetry.dcgm_format import parse_dcgm

pytestmark = pytest.mark.unit
S = 1_000_000_000


def activity(gpus: SimulatedGpus, load: float, seconds: int = 10) -> dict:
    stats = [GpuActivityStats() for _ in range(gpus.n)]
    gpus.set_utilization(load, t_ns=1 * S)
    for k in range(1, seconds + 2):
        for st, reading in zip(stats, parse_dcgm(gpus.render_metrics(t_ns=k * S + S // 2)).readings):
            st.add(k * S + S // 2, reading.activity)
    served = [{"gpu": i, "series": st.to_json()} for i, st in enumerate(stats)]
    return cell_activity("dcgm", served, {"start_ns": 2 * S, "end_ns": (seconds + 1) * S}, {})


def test_host_bound_gpus_are_server_host():
    found = activity(SimulatedGpus(n=2, t_ns=0, busy_fraction=0.17), 1.0)
    assert found["total"]["utilization_percent"] == pytest.approx(17)
    assert gpu_bottleneck(found, 16)[0] is Bottleneck.SERVER_HOST


def test_gpus_held_at_400_w_are_power_capped():
    gpus = SimulatedGpus(n=2, idle_w=100, load_w=700, limit_w=400, t_ns=0)
    found = activity(gpus, 1.0)
    assert gpus.power_w(0) == pytest.approx(400 + gpus.offset_w(0))  # held at the limit
    total = found["total"]
    assert total["power_cap_fraction"] == 1.0 and total["power_violation_fraction"] == pytest.approx(1.0)
    assert total["sm_clock_fraction"] == pytest.approx(0.5, abs=0.01)  # (400 − 100) / (700 − 100) of the work
    verdict, evidence = gpu_bottleneck(found, 64, 400)
    assert verdict is Bottleneck.GPU_POWER_CAP and evidence.startswith("at the 400 W power limit 100 % of the cell")


def test_busy_decoding_gpus_are_memory_bandwidth_bound():
    found = activity(SimulatedGpus(n=2, t_ns=0), 1.0)
    assert found["total"]["dram_active"] == pytest.approx(0.8) and found["total"]["tensor_active"] == pytest.approx(0.2)
    assert gpu_bottleneck(found, 64)[0] is Bottleneck.GPU_MEMORY_BANDWIDTH
    assert "power_cap_fraction" in found["total"] and found["total"]["power_cap_fraction"] == 0.0


def test_nvml_source_reads_the_activity_of_a_capped_gpu():
    import asyncio
    import time

    from loadgen.telemetry.nvml import NvmlSource

    gpus = SimulatedGpus(n=1, idle_w=100, load_w=700, limit_w=400)

    async def cell():
        source = NvmlSource(0.02, nvml=gpus.nvml())
        await source.start()
        gpus.set_utilization(1.0)
        t0 = time.monotonic_ns()
        await asyncio.sleep(0.3)
        t1 = time.monotonic_ns()
        gpus.set_utilization(0.0)
        return await source.stop(), {"start_ns": t0, "end_ns": t1}

    res, window = asyncio.run(cell())
    found = cell_activity("nvml", res.values["activity_gpus"], window, res.values["activity_missing"])
    total = found["total"]
    assert total["utilization_percent"] == pytest.approx(100, abs=10)
    assert total["power_cap_fraction"] == pytest.approx(1.0, abs=0.15)
    assert total["power_violation_fraction"] == pytest.approx(1.0, abs=0.15)
    assert total["sm_clock_fraction"] == pytest.approx(0.5, abs=0.1)
    assert found["unavailable"]["dram_active"].startswith("NVML has no profiling counters")
    assert gpu_bottleneck(found, 16, 400)[0] is Bottleneck.GPU_POWER_CAP
