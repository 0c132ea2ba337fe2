"""exporters/nvml.py: served over a real socket from a fake NVML, scraped like dcgm-exporter."""

import asyncio
import importlib.util
import subprocess
import sys

import aiohttp
import pytest

from exporters import nvml as exporter
from loadgen.sim.gpus import SimulatedGpus, SimulatedNvml
from loadgen.telemetry.dcgm import DcgmSource
from loadgen.telemetry.dcgm_format import parse_dcgm
from loadgen.telemetry.promtext import parse_samples, parse_types
from tests.conftest import serve_metrics_app as serve


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


COLLECT_S = 0.01


def test_dcgm_source_reads_the_exporter_end_to_end():
    """NVML → exporter → DcgmSource: the same energy as the simulated truth."""
    sim = SimulatedGpus(n=2)

    async def go():
        async with serve(exporter.build_app(sim.nvml(), interval_s=COLLECT_S)) as url:
            src = DcgmSource([url], interval_s=0.05)
            before = [sim.energy_mj(i) for i in range(2)]
            await src.start()
            for u in (0.3, 1.0):
                sim.set_utilization(u)
                await asyncio.sleep(0.15)
            res = await src.stop()
            return res, [(sim.energy_mj(i) - b) / 1000 for i, b in enumerate(before)]

    res, truth = asyncio.run(go())
    assert res.values["energy_method"] == "counter"
    # the exporter serves values up to one collect interval old, so either end of the window may lag by
    # that long at up to full power
    lag_j = COLLECT_S * sum(sim.load_w + sim.offset_w(i) for i in range(2))
    assert res.values["energy_j"] == pytest.approx(sum(truth), abs=0.02 * sum(truth) + lag_j)
    assert not [w for w in res.warnings if "identical values" in w or "stopped" in w]


class NoDriverNvml(SimulatedNvml):
    def nvmlInit(self):
        raise self.NVMLError("Driver Not Loaded")


def test_main_exits_2_with_a_reason_when_nvml_is_unavailable(capsys):
    assert exporter.main(["--port", "0"], nvml=NoDriverNvml(SimulatedGpus(n=1))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("exporters.nvml: NVML unavailable") and "Driver Not Loaded" in err and "\n" not in err


def test_defaults_bind_loopback():
    args = exporter.parse_args([])
    assert (args.host, args.port, args.interval) == ("127.0.0.1", 9400, 1.0)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="nvidia-ml-py installed here")
def test_module_entry_point_without_nvidia_ml_py():
    proc = subprocess.run([sys.executable, "-m", "exporters.nvml", "--port", "0"], capture_output=True,
                          text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert "nvidia-ml-py package is not installed" in proc.stderr and "Traceback" not in proc.stderr
