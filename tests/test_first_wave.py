"""Where a closed-loop cell's SLO misses were (`metrics.slo`, the note) and when `--slot-ramp auto` ramps (pure)."""

from __future__ import annotations

import pytest

from loadgen.metrics.slo import slo_figures
from loadgen.record import CellKey, Record
from loadgen.results.slo_part import Slo, first_wave_note

pytestmark = pytest.mark.unit


def rec(seq: int, ttft_ms: float) -> Record:
    sent = 1_000_000_000 + seq * 1000
    first_ns = sent + int(ttft_ms * 1e6)
    return Record("run", CellKey(60, 4), seq, t_intended_ns=sent, t_sent_ns=sent, t_first_token_ns=first_ns,
                  t_last_token_ns=first_ns, t_end_ns=first_ns + 1000, completion_tokens=1)


@pytest.mark.parametrize("ttfts_ms, slots, misses, first_wave_misses", [
    ([500] * 4 + [50] * 8, 4, 4, 4),  # the first wave queued, the rest met
    ([50] * 4 + [500] * 8, 4, 8, 0),  # the later waves missed
    ([500] * 12, 0, 12, 0),  # an open loop has no wave
])
def test_misses_and_those_of_the_first_wave(ttfts_ms, slots, misses, first_wave_misses):
    figures = slo_figures([rec(i, t) for i, t in enumerate(ttfts_ms)], {"ttft": 0.2}, 0.9, 10.0, slots=slots)
    assert (figures["misses"], figures["first_wave_misses"]) == (misses, first_wave_misses)
    assert figures["attainment"] == (len(ttfts_ms) - misses) / len(ttfts_ms)  # one formula, the wave included


def test_the_note_names_the_first_wave_and_the_ramp_when_most_misses_are_there():
    assert first_wave_note(Slo(misses=63, first_wave=64, first_wave_misses=63)) == (
        "SLO: 63 of 63 misses in the first wave (its first 64 requests, one per slot; --slot-ramp S spreads the "
        "slots' starts)")
    assert first_wave_note(Slo(misses=40, first_wave=64, first_wave_misses=2)) == (
        "SLO: 2 of 40 misses in the first wave (its first 64 requests, one per slot)")
    assert first_wave_note(Slo(misses=0, first_wave=64, first_wave_misses=0)) is None
    assert first_wave_note(Slo(misses=5, first_wave=0, first_wave_misses=0)) is None


def test_the_default_ramp_only_with_slo(tmp_path):
    from loadgen.cli.run_config import config_from_args
    from loadgen.cli.run_options import run_parser

    def ramp(*argv: str) -> float:
        cfg = config_from_args(run_parser().parse_args([*argv, "--out", str(tmp_path / "x.json")]))
        return cfg.workload.slot_ramp_s

    assert (ramp(), ramp("--slo", "ttft=1s"), ramp("--slot-ramp", "2.5"), ramp("--slo", "ttft=1s", "--slot-ramp", "0"),
            ramp("--slo", "ttft=1s", "--workers", "2")) == (0.0, 1.0, 2.5, 0.0, 0.0)
