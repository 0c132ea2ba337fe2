"""GPU activity over a cell's window: readings built by hand with a known integral, cut at edges that fall
between readings; clock-event reason bits as time fractions; violation counters as throttled seconds."""

import pytest

from loadgen.metrics.gpu_activity import (
    EDGE_READINGS,
    HW_SLOWDOWN,
    SW_POWER_CAP,
    SW_THERMAL,
    GpuActivityStats,
    HeldSeries,
    window_mean,
)
from loadgen.metrics.gpu_window import cell_activity, gpu_figures, total_figures

pytestmark = pytest.mark.unit
S = 1_000_000_000


def series(points):
    s = HeldSeries()
    for t, v in points:
        s.add(t, v)
    return s.to_json()


def test_backward_hold_cut_inside_readings():
    # readings at 1 s..4 s: 10 covers (0,1], 20 (1,2], 30 (2,3], 40 (3,4]; window [1.5, 3.5]
    s = series([(1 * S, 10), (2 * S, 20), (3 * S, 30), (4 * S, 40)])
    expected = (0.5 * 20 + 1 * 30 + 0.5 * 40) / 2
    assert window_mean(s, int(1.5 * S), int(3.5 * S)) == pytest.approx(expected)


def test_edges_outside_readings_extend_first_and_last():
    s = series([(1 * S, 10), (2 * S, 20)])
    assert window_mean(s, 0, 3 * S) == pytest.approx((1 * 10 + 1 * 20 + 1 * 20) / 3)


def test_repeated_values_keep_the_edges_however_fast_the_polls():
    # a source polling every 20 ms an exporter refreshing every second: thousands of readings, few changes
    points = [(k * 20_000_000, float(k * 20 // 1000 % 2) * 100) for k in range(1, 1000)]
    s = series(points)
    assert len(s["tail"]) <= EDGE_READINGS
    # window [5 s, 19 s]: value 100 on odd seconds' readings (the interval before each) -> half the time
    assert window_mean(s, 5 * S, 19 * S) == pytest.approx(50.0, abs=0.2)


def test_a_window_inside_a_long_series_falls_back_to_its_mean():
    s = series([(k * S, float(k % 2)) for k in range(1, 200)])
    assert window_mean(s, 90 * S, 100 * S) == pytest.approx(0.5, abs=0.01)


def test_reason_bits_are_time_fractions_and_counters_throttled_seconds():
    stats = GpuActivityStats()
    for k in range(11):  # power cap set from 3 s on, thermal from 8 s on; violation counter grows 0.5 s/s
        bits = (SW_POWER_CAP if k >= 3 else 0) | (SW_THERMAL if k >= 8 else 0)
        stats.add(k * S, {"clock_events": bits, "power_violation_ns": 0.5 * k * S, "utilization_percent": 90,
                          "sm_clock_mhz": 1500, "sm_clock_max_mhz": 2000}, hold_ns=1 * S)
    fig = gpu_figures(stats.to_json(), 0, 10 * S)
    assert fig["power_cap_fraction"] == pytest.approx(0.8)  # bits seen at 3 s hold over (2, 3]: 8 of 10 s
    assert fig["thermal_fraction"] == pytest.approx(0.3)
    assert fig["hw_slowdown_fraction"] == 0.0
    assert fig["power_violation_s"] == pytest.approx(5.0)
    assert fig["power_violation_fraction"] == pytest.approx(0.5)
    assert fig["sm_clock_fraction"] == pytest.approx(0.75)


def test_counter_restart_loses_only_that_interval():
    stats = GpuActivityStats()
    for t, c in ((0, 100 * S), (1 * S, 101 * S), (2 * S, 0.5 * S), (3 * S, 1.5 * S)):
        stats.add(t, {"power_violation_ns": c})
    assert gpu_figures(stats.to_json(), 0, 3 * S)["power_violation_s"] == pytest.approx(3.0)


def test_total_means_over_gpus_sums_memory_and_says_what_is_missing():
    gpus = []
    for i, util in enumerate((10, 30)):
        stats = GpuActivityStats()
        stats.add(1 * S, {"utilization_percent": util, "memory_used_mib": 1000, "clock_events": HW_SLOWDOWN * i})
        stats.add(2 * S, {"utilization_percent": util, "memory_used_mib": 1000, "clock_events": HW_SLOWDOWN * i})
        gpus.append({"gpu": i, "series": stats.to_json()})
    out = cell_activity("dcgm", gpus, {"start_ns": 1 * S, "end_ns": 2 * S}, {"dram_active": "not exported"})
    assert out["total"]["utilization_percent"] == 20 and out["total"]["memory_used_mib"] == 2000
    assert out["total"]["hw_slowdown_fraction"] == 0.5
    assert out["unavailable"]["dram_active"] == "not exported"
    assert "utilization_percent" not in out["unavailable"] and "tensor_active" in out["unavailable"]
    assert "dram_active" not in out["total"]  # absent, never 0
    assert total_figures([]) == {}
    assert cell_activity("dcgm", gpus, None, {}) is None


def test_hold_says_how_far_back_a_reading_reaches():
    # readings every 1 s: 0 at 0..3 s, 100 from 4 s on; the window [0, 10 s]
    def mean(hold_ns):
        stats = GpuActivityStats()
        for k in range(11):
            stats.add(k * S, {"utilization_percent": 100 if k >= 4 else 0}, hold_ns)
        return gpu_figures(stats.to_json(), 0, 10 * S)["utilization_percent"]
    assert mean(1 * S) == pytest.approx(70)  # the reading at 4 s covers (3, 4]: an average over its second
    assert mean(0) == pytest.approx(60)  # fresh values: each holds forward until the next reading
    assert mean(S // 4) == pytest.approx(62.5)  # a quarter second back, the rest forward


def test_a_sparse_fresh_reading_after_the_window_does_not_count():
    # a fresh exporter read at the start of a short cell, then once more after it: busy in between
    stats = GpuActivityStats()
    for t, util in ((0, 0), (S // 20, 50), (2 * S, 0)):
        stats.add(t, {"utilization_percent": util}, 0)
    assert gpu_figures(stats.to_json(), S // 50, int(1.9 * S))["utilization_percent"] == pytest.approx(
        50 * (1.9 - 0.05) / (1.9 - 0.02))
