"""The bottleneck verdict: every verdict from figures built by hand, on both sides of its threshold."""

import pytest

from loadgen.metrics.bottleneck import (
    BUSY_UTIL_PERCENT,
    DRAM_BOUND,
    SERVER_HOST_UTIL_PERCENT,
    THROTTLE_FRACTION,
    bottleneck,
)
from loadgen.names import Bottleneck

pytestmark = pytest.mark.unit


def verdict(in_flight=64.0, client=None, limit_w=None, **total):
    return bottleneck(client, {"total": total}, in_flight, limit_w)


def test_client_first():
    got = verdict(client={"saturated": True, "reasons": ["event-loop lag p99 21.4 ms > 10 ms"]}, utilization_percent=10)
    assert got[0] is Bottleneck.CLIENT and "21.4 ms" in got[1]


def test_unknown_without_utilization():
    assert bottleneck(None, None, 64, None)[0] is Bottleneck.UNKNOWN
    assert verdict(dram_active=0.9)[0] is Bottleneck.UNKNOWN


def test_server_host_needs_requests_in_flight():
    got = verdict(utilization_percent=14)
    assert got == (Bottleneck.SERVER_HOST, "GPU 14 % busy with 64 requests in flight: the server's host side, "
                                           "not the GPU, limits throughput")
    assert verdict(utilization_percent=SERVER_HOST_UTIL_PERCENT)[0] is not Bottleneck.SERVER_HOST
    assert verdict(in_flight=0.2, utilization_percent=14)[0] is Bottleneck.UNKNOWN
    assert verdict(gr_engine_active=0.14)[0] is Bottleneck.SERVER_HOST  # no GPU_UTIL: the graphics engine's


def test_power_cap_from_reasons_or_violation_time():
    got = verdict(limit_w=400, utilization_percent=99, power_cap_fraction=0.92, sm_clock_fraction=0.61)
    assert got == (Bottleneck.GPU_POWER_CAP, "at the 400 W power limit 92 % of the cell, SM clock 61 % of max")
    assert verdict(utilization_percent=99, power_cap_fraction=THROTTLE_FRACTION - 0.01)[0] is Bottleneck.UNKNOWN
    assert verdict(utilization_percent=99, power_violation_fraction=0.7)[0] is Bottleneck.GPU_POWER_CAP
    # the reasons, where served, win over the violation counter (whose unit DCGM builds disagree on)
    assert verdict(utilization_percent=99, power_cap_fraction=0.1, power_violation_fraction=0.7)[0] is Bottleneck.UNKNOWN


def test_thermal_and_hardware_slowdown():
    assert verdict(utilization_percent=99, thermal_fraction=0.7)[0] is Bottleneck.GPU_THERMAL
    got = verdict(utilization_percent=99, hw_slowdown_fraction=0.6, sm_clock_fraction=0.5)
    assert got == (Bottleneck.GPU_THERMAL, "hardware slowdown 60 % of the cell, SM clock 50 % of max")


def test_memory_bandwidth_and_compute():
    got = verdict(utilization_percent=97, dram_active=0.8, tensor_active=0.12)
    assert got == (Bottleneck.GPU_MEMORY_BANDWIDTH, "DRAM 80 % active, tensor pipe 12 %: memory-bandwidth-bound, "
                                                    "compute to spare (a larger draft tree costs little)")
    assert verdict(utilization_percent=97, dram_active=DRAM_BOUND - 0.01, tensor_active=0.12)[0] is Bottleneck.UNKNOWN
    got = verdict(utilization_percent=97, dram_active=0.3, tensor_active=0.65)
    assert got[0] is Bottleneck.GPU_COMPUTE and "tensor pipe 65 %" in got[1]
    assert verdict(utilization_percent=97, sm_active=0.9)[0] is Bottleneck.GPU_COMPUTE
    assert verdict(utilization_percent=BUSY_UTIL_PERCENT - 1, tensor_active=0.65)[0] is Bottleneck.UNKNOWN


def test_unknown_says_what_it_lacks():
    got = verdict(utilization_percent=90)
    assert got[0] is Bottleneck.UNKNOWN and "without DCGM profiling ratios" in got[1]


def test_throttling_comes_before_low_utilization():
    got = verdict(utilization_percent=45, power_cap_fraction=0.79)
    assert got[0] is Bottleneck.GPU_POWER_CAP
