"""NvmlSource and nvml_available with fake NVML modules (the simulated GPUs' NVML view, and broken ones)."""

import asyncio
import threading

import pytest

from loadgen.cli.telemetry_checks import lost
from loadgen.metrics.source_result import SourceResult
from loadgen.sim.gpus import SimulatedGpus, SimulatedNvml
from loadgen.telemetry import nvml as nvml_mod
from loadgen.telemetry.nvml import NvmlSource, nvml_available

pytestmark = pytest.mark.unit

INTERVAL_S = 0.05


async def run_cell(src, sim, steps):
    before = [sim.energy_mj(i) / 1000 for i in range(sim.n)]
    await src.start()
    for duration_s, u in steps:
        sim.set_utilization(u)
        await asyncio.sleep(duration_s)
    res = await src.stop()
    return res, [sim.energy_mj(i) / 1000 - b for i, b in enumerate(before)]


STEPS = [(0.1, 0.2), (0.15, 1.0), (0.1, 0.5)]


def test_figures_match_the_truth():
    sim = SimulatedGpus(n=3, limit_w=700.0, model="NVIDIA H200 (fake)")
    fake = sim.nvml()
    res, truth = asyncio.run(run_cell(NvmlSource(INTERVAL_S, nvml=fake), sim, STEPS))
    assert res.available and res.name == "nvml" and res.kind == "power"
    v = res.values
    assert v["source"] == "nvml" and v["gpus"] == 3 and v["energy_method"] == "counter"
    assert v["energy_j"] == pytest.approx(sum(truth), rel=0.02)
    for i, g in enumerate(v["per_gpu"]):
        assert (g["gpu"], g["uuid"], g["model"]) == (i, sim.uuids[i], "NVIDIA H200 (fake)")
        assert g["node"].startswith("nvml://") and g["limit_w"] == 700.0
        assert g["max_w"] == pytest.approx(sim.load_w + sim.offset_w(i), abs=0.01)
        assert g["energy_j"] == pytest.approx(truth[i], rel=0.02)
    assert v["limit_w_total"] == 2100 and v["power_fraction_of_limit"] == pytest.approx(v["mean_w_total"] / 2100)
    assert res.warnings == []
    assert fake.initialized == 0  # every nvmlInit matched by nvmlShutdown


def test_without_energy_counter_integrates_and_says_so():
    sim = SimulatedGpus(n=2)
    sim.set_utilization(0.7)  # constant load: the trapezoid is exact but for the readings' ±0.05 W noise
    src = NvmlSource(INTERVAL_S, nvml=sim.nvml(energy_supported=False))
    res, _ = asyncio.run(run_cell(src, sim, [(0.3, 0.7)]))
    v = res.values
    assert v["energy_method"] == "integrated"
    # integrated from the first reading to the last: the truth over that same span (a busy machine delays
    # the first reading after start() by tens of ms, which the span before it would add to the truth)
    truth = [sim.power_w(i) * (st.t_last_ns - st.t_first_ns) / 1e9 for i, st in enumerate(src._stats)]
    assert v["energy_j"] == pytest.approx(sum(truth), rel=0.02)
    assert any("no energy counter" in w for w in res.warnings)


class ThreadCheckingNvml(SimulatedNvml):
    """Records the thread of every power read: NVML calls must stay off the event loop's thread."""

    def __init__(self, gpus):
        super().__init__(gpus)
        self.threads = set()

    def nvmlDeviceGetPowerUsage(self, handle):
        self.threads.add(threading.get_ident())
        return super().nvmlDeviceGetPowerUsage(handle)


def test_nvml_calls_run_off_the_event_loop():
    sim = SimulatedGpus(n=1)
    fake = ThreadCheckingNvml(sim)

    async def go():
        loop_thread = threading.get_ident()
        await run_cell(NvmlSource(INTERVAL_S, nvml=fake), sim, [(0.12, 0.5)])
        return loop_thread

    loop_thread = asyncio.run(go())
    assert fake.threads and loop_thread not in fake.threads


class LostGpuNvml(SimulatedNvml):
    """GPU 1 falls off the bus after a few reads."""

    reads = 0

    def nvmlDeviceGetPowerUsage(self, handle):
        if handle == 1:
            self.reads += 1
            if self.reads > 3:
                raise self.NVMLError("GPU is lost")
        return super().nvmlDeviceGetPowerUsage(handle)


def test_gpu_lost_mid_cell_keeps_its_earlier_readings():
    sim = SimulatedGpus(n=2)
    res, _ = asyncio.run(run_cell(NvmlSource(INTERVAL_S, nvml=LostGpuNvml(sim)), sim, [(0.3, 0.5)]))
    g0, g1 = res.values["per_gpu"]
    assert g1["samples"] == 3 and g0["samples"] > 3
    assert any("GPU 1 could not be read (GPU is lost)" in w for w in res.warnings)
    # the loss is said as a loss, and that, not its words, is what a required source's check reads
    assert res.losses == [w for w in res.warnings if "could not be read" in w] and lost(res) == res.losses[0]
    assert lost(SourceResult("n", "power", True, warnings=["nvml: GPU 1 could not be read (x)"])) is None


class NoDriverNvml(SimulatedNvml):
    def nvmlInit(self):
        raise self.NVMLError("Driver Not Loaded")


class NoGpuNvml(SimulatedNvml):
    def nvmlDeviceGetCount(self):
        return 0


@pytest.mark.parametrize("fake,words", [
    (NoDriverNvml(SimulatedGpus(n=1)), "could not initialise NVML (Driver Not Loaded)"),
    (NoGpuNvml(SimulatedGpus(n=1)), "NVML found no GPU"),
])
def test_unavailable_is_a_reason_not_a_crash(fake, words):
    ok, reason = nvml_available(fake)
    assert not ok and words in reason and "\n" not in reason

    async def go():
        src = NvmlSource(INTERVAL_S, nvml=fake)
        await src.start()
        return await src.stop()

    res = asyncio.run(go())
    assert not res.available and words in res.reason and res.values == {}


def test_missing_library(monkeypatch):
    def no_pynvml():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml_mod, "load_nvml", no_pynvml)
    ok, reason = nvml_available()
    assert not ok and "nvidia-ml-py package is not installed" in reason and "pip install nvidia-ml-py" in reason


def test_available_names_the_gpus():
    ok, reason = nvml_available(SimulatedGpus(n=2, model="NVIDIA H200").nvml())
    assert ok and reason == "NVML: 2 GPUs, NVIDIA H200"
