"""The simulated GPU set: exact energy truth, dcgm-exporter-shaped text, faults, the NVML view."""

import pytest

from loadgen.sim.gpus import SimulatedGpus
from loadgen.telemetry.dcgm_format import ENERGY, MGMT_LIMIT, POWER, parse_dcgm
from loadgen.telemetry.promtext import parse_samples, parse_types

pytestmark = pytest.mark.unit

S = 1_000_000_000


def test_power_follows_utilization_and_energy_is_the_exact_integral():
    g = SimulatedGpus(n=2, idle_w=100.0, load_w=400.0, t_ns=0)
    g.set_utilization(0.5, t_ns=2 * S)  # 0-2 s idle
    g.set_utilization(1.0, t_ns=3 * S)  # 2-3 s half load
    assert g.power_w(0) == pytest.approx(400.0 + g.offset_w(0))
    # GPU 1: (100+o)·2 + (250+o)·1 + (400+o)·1
    o = g.offset_w(1)
    assert g.energy_mj(1, 4 * S) == pytest.approx(1000 * ((100 + o) * 2 + (250 + o) + (400 + o)))
    assert g.offset_w(0) != g.offset_w(1)


def test_utilization_is_clamped_and_stale_times_are_taken_as_the_last_change():
    g = SimulatedGpus(n=1, idle_w=100.0, load_w=400.0, t_ns=0)
    g.set_utilization(7.0, t_ns=1 * S)
    assert g.utilization == 1.0
    g.set_utilization(0.0, t_ns=S // 2)  # earlier than the last change: applied at 1 s
    assert g.energy_mj(0, 2 * S) == pytest.approx(1000 * (100 + g.offset_w(0)) * 2)


def test_render_is_dcgm_exporter_text():
    g = SimulatedGpus(n=3, t_ns=0)
    g.set_utilization(1.0, t_ns=0)
    text = g.render_metrics(t_ns=10 * S)
    types = parse_types(text)
    assert types[POWER] == "gauge" and types[ENERGY] == "counter" and types[MGMT_LIMIT] == "gauge"
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP"):
        assert name in types
    assert "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ)." in text
    power = [s for s in parse_samples(text) if s.name == POWER]
    assert list(power[2].labels) == ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                                     "DCGM_FI_DRIVER_VERSION"]
    assert power[2].labels["device"] == "nvidia2" and power[2].labels["modelName"] == "NVIDIA B300 (simulated)"
    readings = parse_dcgm(text).readings
    assert [r.gpu for r in readings] == ["0", "1", "2"]
    assert readings[0].energy_mj == int(g.energy_mj(0, 10 * S)) and readings[0].limit_w == 1100.0
    assert readings[0].power_w == pytest.approx(450.0 + g.offset_w(0), abs=0.06)  # ±0.05 W sensor noise


def test_export_switches_and_new_hostname_label():
    g = SimulatedGpus(n=1, export_energy=False, export_limit=False, hostname_label="hostname")
    text = g.render_metrics()
    assert ENERGY not in text and MGMT_LIMIT not in text
    assert parse_dcgm(text).readings[0].hostname == "sim-node-0"


def test_counter_reset_restarts_at_zero_but_truth_continues():
    g = SimulatedGpus(n=2, t_ns=0)
    g.reset_counter(gpu=1, t_ns=5 * S)
    assert g.counter_mj(1, 5 * S) == pytest.approx(0.0)
    assert g.counter_mj(0, 5 * S) == pytest.approx(g.energy_mj(0, 5 * S))
    assert g.counter_mj(1, 6 * S) == pytest.approx(g.energy_mj(1, 6 * S) - g.energy_mj(1, 5 * S))


def test_frozen_mode_refreshes_only_every_collect_interval():
    g = SimulatedGpus(n=1, collect_interval_s=30.0, t_ns=0)
    first = g.render_metrics(t_ns=1 * S)
    g.set_utilization(1.0, t_ns=2 * S)
    assert g.render_metrics(t_ns=20 * S) == first
    assert g.render_metrics(t_ns=31 * S) != first


def test_nvml_view_units():
    g = SimulatedGpus(n=2, limit_w=700.0, t_ns=0)
    nv = g.nvml()
    h = nv.nvmlDeviceGetHandleByIndex(1)
    assert nv.nvmlDeviceGetPowerUsage(h) == round(g.power_w(1) * 1000)  # mW
    assert nv.nvmlDeviceGetEnforcedPowerLimit(h) == 700_000
    assert nv.nvmlDeviceGetUUID(h) == g.uuids[1]
    with pytest.raises(nv.NVMLError):
        nv.nvmlDeviceGetHandleByIndex(2)
    with pytest.raises(nv.NVMLError):
        g.nvml(energy_supported=False).nvmlDeviceGetTotalEnergyConsumption(h)
