"""parse_dcgm on dcgm-exporter text as real exporters write it (labels, versions, sentinels, MIG)."""

import pytest

from loadgen.telemetry.dcgm import normalize_url
from loadgen.telemetry.dcgm_format import parse_dcgm

pytestmark = pytest.mark.unit

# Two GPUs from a real 8×H200 node's answer (dcgm-exporter 4.x default CSV, trimmed).
REAL = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-7848a317-0dea-dbd3-7253-ee483eeedc12",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 1980
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-7848a317-0dea-dbd3-7253-ee483eeedc12",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 102.396429
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-ab110093-71c8-952d-2bb2-c97e72a40457",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 103.420393
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-7848a317-0dea-dbd3-7253-ee483eeedc12",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 17883017956
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-ab110093-71c8-952d-2bb2-c97e72a40457",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 21211111985
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{gpu="0",UUID="GPU-7848a317-0dea-dbd3-7253-ee483eeedc12",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="570.133.20"} 9223372036854775794
"""


def test_real_exporter_text():
    scrape = parse_dcgm(REAL)
    r0, r1 = scrape.readings
    assert (r0.gpu, r0.uuid, r0.hostname, r0.model) == ("0", "GPU-7848a317-0dea-dbd3-7253-ee483eeedc12",
                                                        "gpu-node-1", "NVIDIA H200")
    assert r0.power_w == 102.396429 and r0.energy_mj == 17883017956 and r0.limit_w is None
    assert r1.power_w == 103.420393 and r1.energy_mj == 21211111985
    assert scrape.blank_fields == set()  # MEMORY_TEMP's sentinel is in a field we never read


def test_limits_enforced_wins_and_sentinels_are_dropped():
    text = (
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="U0"} 400\n'
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0",UUID="U0"} 700\n'
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0",UUID="U0"} 650\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="U1"} 9223372036854775794\n'
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="1",UUID="U1"} 700\n'
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="1",UUID="U1"} 9223372036854775794\n'
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="U1"} NaN\n'
    )
    r0, r1 = parse_dcgm(text).readings
    assert r0.limit_w == 650  # enforced: what actually caps the GPU
    assert r1.power_w is None and r1.limit_w == 700 and r1.energy_mj is None
    assert parse_dcgm(text).blank_fields == {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"}


@pytest.mark.parametrize("labels", [
    'gpu="0",uuid="U0",modelName="M",hostname="new-build"',  # -o old namespace; hostname after 4.5.3-4.8.2
    'gpu="0",UUID="U0",modelName="M",hostname="new-build"',
])
def test_label_spellings(labels):
    (r,) = parse_dcgm(f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 5\n").readings
    assert (r.gpu, r.uuid, r.hostname) == ("0", "U0", "new-build")


def test_no_hostname_label():
    (r,) = parse_dcgm('DCGM_FI_DEV_POWER_USAGE{gpu="3",UUID="U3"} 5\n').readings
    assert r.hostname is None and r.gpu == "3"


def test_mig_instances_do_not_count_a_device_twice():
    text = (
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="U0",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7"} 300\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="U0",GPU_I_PROFILE="1g.10gb",GPU_I_ID="8"} 300\n'
    )
    (r,) = parse_dcgm(text).readings
    assert r.power_w == 300


def test_malformed_line_costs_only_itself():
    scrape = parse_dcgm('DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="U0"} 1\nDCGM_FI_DEV_POWER_USAGE{gpu="1" oops\n')
    assert len(scrape.readings) == 1 and scrape.skipped_lines == 1


@pytest.mark.parametrize("given,url", [
    ("node1:9400", "http://node1:9400/metrics"),
    ("http://node1:9400/", "http://node1:9400/metrics"),
    ("https://gpu.example/dcgm/metrics", "https://gpu.example/dcgm/metrics"),
])
def test_normalize_url(given, url):
    assert normalize_url(given) == url
