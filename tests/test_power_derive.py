"""Pure power arithmetic: per-GPU running stats, the cell summary, per-token figures, exposition text."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadgen.metrics.power import GpuPowerStats, cell_energy_j, derive_power, summarize_power
from loadgen.telemetry.promtext import parse_samples, parse_text, parse_types, render_family

pytestmark = pytest.mark.unit

S = 1_000_000_000  # ns per s


def test_trapezoid_mean_and_max():
    st_ = GpuPowerStats()
    for t_s, p in [(0, 100.0), (1, 300.0), (3, 300.0)]:
        st_.add(t_s * S, p)
    f = st_.figures()
    # ∫ = (100+300)/2·1 + 300·2 = 800 J over 3 s
    assert f["energy_integrated_j"] == pytest.approx(800.0)
    assert f["energy_j"] == pytest.approx(800.0) and f["energy_method"] == "integrated"
    assert f["mean_w"] == pytest.approx(800.0 / 3)
    assert f["max_w"] == 300.0 and f["covered_s"] == 3.0 and f["samples"] == 3


def test_counter_preferred_over_integral():
    st_ = GpuPowerStats()
    st_.add(0, 100.0, energy_mj=5_000_000.0, limit_w=700.0)
    st_.add(2 * S, 100.0, energy_mj=5_250_000.0)
    f = st_.figures()
    assert f["energy_method"] == "counter" and f["energy_j"] == pytest.approx(250.0)
    assert f["energy_integrated_j"] == pytest.approx(200.0)
    assert f["limit_w"] == 700.0


def test_counter_reset_adds_both_segments_and_the_straddling_interval():
    st_ = GpuPowerStats()
    st_.add(0, 100.0, 1_000_000.0)
    st_.add(1 * S, 100.0, 1_100_000.0)  # +100 J
    st_.add(2 * S, 100.0, 40_000.0)  # restarted 0.4 s ago: 60 J before it + 40 J since
    st_.add(3 * S, 100.0, 140_000.0)  # +100 J
    f = st_.figures()
    assert f["counter_resets"] == 1
    assert f["energy_j"] == pytest.approx(300.0)


def test_counter_reset_when_the_load_changed_with_it():
    st_ = GpuPowerStats()
    st_.add(0, 200.0, 1_000_000.0)
    st_.add(1 * S, 200.0, 1_200_000.0)  # +200 J
    st_.add(2 * S, 500.0, 100_000.0)  # 500 W for the 0.2 s since the restart, 200 W for 0.8 s before
    assert st_.figures()["energy_j"] == pytest.approx(200 + 160 + 100)


def test_single_reading_has_no_energy():
    st_ = GpuPowerStats()
    st_.add(0, 250.0, 1000.0)
    f = st_.figures()
    assert f["energy_j"] is None and f["energy_method"] is None and f["mean_w"] == 250.0


def test_out_of_order_reading_ignored():
    st_ = GpuPowerStats()
    st_.add(2 * S, 100.0)
    st_.add(1 * S, 900.0)
    assert st_.n == 1 and st_.max_w == 100.0


def test_unchanged_runs():
    fresh = GpuPowerStats()
    for i in range(5):
        fresh.add(i * S, 100.0 + i, 1000.0 * i)
    assert fresh.longest_unchanged_ns == 0 and not fresh.never_changed

    stuck = GpuPowerStats()
    for i in range(5):
        stuck.add(i * S, 100.0, 1000.0)
    assert stuck.never_changed and stuck.longest_unchanged_ns == 4 * S

    coarse = GpuPowerStats()  # refreshed every 3 s, sampled every 1 s
    for i in range(7):
        coarse.add(i * S, 100.0 + i // 3, 1000.0 * (i // 3))
    assert not coarse.never_changed and coarse.longest_unchanged_ns == 2 * S


@given(st.lists(st.floats(0, 2000), min_size=2, max_size=50))
def test_constant_step_trapezoid_equals_counter(powers):
    """A counter that is the exact integral of the readings' trapezoid gives the same energy."""
    st_ = GpuPowerStats()
    e_mj = 0.0
    for i, p in enumerate(powers):
        if i:
            e_mj += (powers[i - 1] + p) / 2 * 1000
        st_.add(i * S, p, e_mj)
    f = st_.figures()
    assert f["energy_j"] == pytest.approx(f["energy_integrated_j"], rel=1e-9, abs=1e-6)


@given(st.lists(st.floats(1, 1000), min_size=3, max_size=40), st.data())
def test_counter_resets_never_lose_energy(powers, data):
    """Power p_i is drawn during the second before reading i; the counter restarts right after reading i-1
    for each i in `resets`: every restart is accounted for exactly."""
    wanted = data.draw(st.sets(st.integers(1, len(powers) - 1)))
    st_ = GpuPowerStats()
    counter_mj, truth_j, resets = 5e6, 0.0, []
    for i, p in enumerate(powers):
        drawn_j = p if i else 0.0
        truth_j += drawn_j
        if i in wanted and drawn_j * 1000 < counter_mj:  # a restart is only visible when the counter drops
            counter_mj = drawn_j * 1000
            resets.append(i)
        else:
            counter_mj += drawn_j * 1000
        st_.add(i * S, p, counter_mj)
    assert st_.resets == len(resets)
    assert st_.figures()["energy_j"] == pytest.approx(truth_j, rel=1e-9)


def _gpu(mean_w, max_w, limit_w, energy_j, covered_s=10.0, method="counter"):
    return {"mean_w": mean_w, "max_w": max_w, "limit_w": limit_w, "energy_j": energy_j,
            "energy_method": method, "covered_s": covered_s}


def test_summarize_totals_and_fraction_of_limit():
    v = summarize_power("dcgm", [_gpu(450, 500, 1100, 4500), _gpu(440, 480, 1100, 4400)], 975.0, 10.0)
    assert v["gpus"] == 2 and v["mean_w_total"] == 890 and v["max_w_total"] == 975.0
    assert v["energy_j"] == 8900 and v["energy_method"] == "counter"
    assert v["limit_w_total"] == 2200 and v["power_fraction_of_limit"] == pytest.approx(890 / 2200)
    assert v["energy_coverage"] == 1.0


def test_summarize_missing_limit_and_mixed_methods():
    v = summarize_power("dcgm", [_gpu(450, 500, None, 4500), _gpu(440, 480, 1100, 4400, method="integrated")],
                        975.0, 10.0)
    assert v["limit_w_total"] is None and v["power_fraction_of_limit"] is None
    assert v["energy_method"] == "mixed"


def test_derive_power_formulas():
    v = summarize_power("dcgm", [_gpu(450, 500, 1100, 4500), _gpu(450, 500, 1100, 4500)], 1000.0, 10.0)
    d = derive_power(v, output_tokens=9000, duration_s=10.0)
    assert d["cell_energy_j"] == pytest.approx(9000)
    assert d["j_per_output_token"] == pytest.approx(1.0)
    assert d["output_tokens_per_j"] == pytest.approx(1.0)
    for key in ("source", "gpus", "mean_w_total", "max_w_total", "per_gpu", "energy_j"):
        assert key in d  # DESIGN.md §4 power fields


@pytest.mark.parametrize("tokens,energy", [(0, 100.0), (100, None), (100, 0.0)])
def test_derive_power_none_without_tokens_or_energy(tokens, energy):
    d = derive_power({"energy_j": energy, "per_gpu": []}, output_tokens=tokens, duration_s=10.0)
    assert d["j_per_output_token"] is None and d["output_tokens_per_j"] is None


def test_cell_energy_extrapolates_a_gpu_whose_node_stopped_answering():
    per_gpu = [_gpu(400, 400, 1100, 4000, covered_s=10.0), _gpu(400, 400, 1100, 2000, covered_s=5.0)]
    assert cell_energy_j({"per_gpu": per_gpu, "energy_j": 6000}, 10.0) == pytest.approx(8000)
    assert cell_energy_j({"per_gpu": [], "energy_j": 6000}, 10.0) == 6000


def test_promtext_keeps_names_as_served():
    text = (
        "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-1"} 17883017956\n'
        "# TYPE sglang:generation_tokens_total counter\n"
        'sglang:generation_tokens_total{model_name="m"} 1234\n'
        "# TYPE sglang:ttft_seconds histogram\n"
        'sglang:ttft_seconds_bucket{le="0.1"} 3\n'
        'sglang:ttft_seconds_bucket{le="+Inf"} 5\n'
        "sglang:ttft_seconds_sum 0.7\n"
        "vllm:num_requests_running 2\n"
    )
    samples = parse_samples(text)
    names = [s.name for s in samples]
    assert names == ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "sglang:generation_tokens_total",
                     "sglang:ttft_seconds_bucket", "sglang:ttft_seconds_bucket", "sglang:ttft_seconds_sum",
                     "vllm:num_requests_running"]
    assert samples[0].value == 17883017956 and samples[0].labels == {"gpu": "0", "UUID": "GPU-1"}
    assert samples[3].labels["le"] == "+Inf" and math.isclose(samples[4].value, 0.7)
    assert parse_types(text)["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert [s.name for s in parse_samples(text, names=["vllm:num_requests_running"])] == ["vllm:num_requests_running"]


def test_promtext_skips_malformed_lines():
    parsed = parse_text('good{a="1"} 1\nthis is not a sample\nalso_good 2 # {trace_id="x"} 1.0\nnan_one NaN\n')
    assert [s.name for s in parsed.samples] == ["good", "also_good", "nan_one"]
    assert parsed.skipped_lines == 1 and math.isnan(parsed.samples[2].value)


def test_render_family_round_trip():
    text = render_family("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
                         [({"gpu": "0", "modelName": 'A "quoted"\\name'}, 102.5), ({"gpu": "1"}, 7.0)])
    assert text.startswith("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n")
    assert 'DCGM_FI_DEV_POWER_USAGE{gpu="1"} 7\n' in text
    samples = parse_samples(text)
    assert samples[0].labels["modelName"] == 'A "quoted"\\name' and samples[0].value == 102.5
