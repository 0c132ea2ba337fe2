"""exporters/nvml.py: served over a real socket from a fake NVML, scraped like dcgm-exporter."""

import asyncio
import importlib.util
import subprocess
import sys
import time

import aiohttp
import pytest

from exporters import nvml as exporter
from loadgen.metrics.power import cell_energy_j
from loadgen.sim.energy_truth import window_energy_j
from loadgen.sim.gpus import SimulatedGpus, SimulatedNvml
from loadgen.telemetry.dcgm import DcgmSource
from loadgen.telemetry.dcgm_format import parse_dcgm
from loadgen.telemetry.promtext import parse_samples, parse_types
from tests.conftest import serve_metrics_app as serve


@pytest.mark.sim
def test_serves_dcgm_names_units_and_labels():
    sim = SimulatedGpus(n=2, limit_w=700.0, model="NVIDIA H200")
    sim.set_utilization(1.0)
    fake = sim.nvml()

    async def go():
        async with serve(exporter.build_app(fake, interval_s=0.05, hostname="box-1")) as url, \
                aiohttp.ClientSession() as s, s.get(url) as resp:
            assert resp.status == 200
            return await resp.text()

    text = asyncio.run(go())
    types = parse_types(text)
    assert types["DCGM_FI_DEV_POWER_USAGE"] == "gauge" and types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    for name in ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_GPU_UTIL",
                 "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"):
        assert name in types
    power = [s for s in parse_samples(text) if s.name == "DCGM_FI_DEV_POWER_USAGE"]
    assert power[1].labels == {"gpu": "1", "UUID": sim.uuids[1], "pci_bus_id": "00000000:28:00.0",
                               "device": "nvidia1", "modelName": "NVIDIA H200", "Hostname": "box-1",
                               "DCGM_FI_DRIVER_VERSION": sim.driver_version}
    _, r1 = parse_dcgm(text).readings
    assert r1.power_w == pytest.approx(sim.power_w(1), abs=0.001)  # mW → W
    assert r1.limit_w == 700.0 and r1.energy_mj > 0
    util = [s.value for s in parse_samples(text) if s.name == "DCGM_FI_DEV_GPU_UTIL"]
    assert util == [100, 100]
    assert fake.initialized == 0  # NVML shut down with the app


COLLECT_S = 0.002


class CollectionClock(SimulatedNvml):
    """A fake NVML that notes when the exporter read each energy counter: the ages its values can have."""

    def __init__(self, gpus: SimulatedGpus):
        super().__init__(gpus)
        self.read_ns: list[int] = []

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if handle == 0:
            self.read_ns.append(time.monotonic_ns())
        return super().nvmlDeviceGetTotalEnergyConsumption(handle)


@pytest.mark.sim
def test_dcgm_source_reads_the_exporter_end_to_end():
    """NVML → exporter → DcgmSource → the cell's energy: the simulated truth over exactly the cell's window.

    The load steps at the window's start (idle → 30 %), as a cell's does. A reading is dated when it was
    scraped while the exporter collected it up to one of its collections earlier, so each edge may be cut
    that much off: the bound is the largest gap between the exporter's collections while it was scraped,
    measured here (a busy machine stretches it), at the power the GPUs draw at each edge."""
    sim = SimulatedGpus(n=2)
    nvml = CollectionClock(sim)

    async def go():
        async with serve(exporter.build_app(nvml, interval_s=COLLECT_S)) as url:
            src = DcgmSource([url], interval_s=0.05)
            await src.start()
            t0 = time.monotonic_ns()
            for u in (0.3, 1.0):
                sim.set_utilization(u, t0 if u == 0.3 else None)
                await asyncio.sleep(0.15)
            t1 = time.monotonic_ns()
            return await src.stop(), t0, t1, src

    res, t0, t1, src = asyncio.run(go())
    assert res.values["energy_method"] == "counter"
    truth_j = sum(window_energy_j(sim, t0, t1))
    figure_j = cell_energy_j(res.values, (t1 - t0) / 1e9, {"start_ns": t0, "end_ns": t1})
    # the last scrape may come long after the last collection: a pause of this process stops the exporter too
    reads = [*nvml.read_ns, src.t_stop_ns]
    gaps_s = [(b - a) / 1e9 for a, b in zip(reads, reads[1:]) if a <= src.t_stop_ns and b >= src.t_start_ns]
    edges_w = sum(sim.idle_w + sim.offset_w(i) + (sim.load_w - sim.idle_w) * u for i in range(2) for u in (0.3, 1))
    assert figure_j == pytest.approx(truth_j, abs=max(gaps_s) * edges_w), (max(gaps_s), len(gaps_s))
    assert not [w for w in res.warnings if "identical values" in w or "stopped" in w]


class NoDriverNvml(SimulatedNvml):
    def nvmlInit(self):
        raise self.NVMLError("Driver Not Loaded")


@pytest.mark.unit
def test_main_exits_2_with_a_reason_when_nvml_is_unavailable(capsys):
    assert exporter.main(["--port", "0"], nvml=NoDriverNvml(SimulatedGpus(n=1))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("exporters.nvml: NVML unavailable") and "Driver Not Loaded" in err and "\n" not in err


@pytest.mark.unit
def test_defaults_bind_loopback():
    args = exporter.parse_args([])
    assert (args.host, args.port, args.interval) == ("127.0.0.1", 9400, 1.0)


@pytest.mark.sim
@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="nvidia-ml-py installed here")
def test_module_entry_point_without_nvidia_ml_py():
    proc = subprocess.run([sys.executable, "-m", "exporters.nvml", "--port", "0"], capture_output=True,
                          text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert "nvidia-ml-py package is not installed" in proc.stderr and "Traceback" not in proc.stderr
