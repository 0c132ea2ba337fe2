"""The request-rate ceiling on closed loop (`--max-request-rate R`): never more than R starts in any 1 s
window, R reached when the server is fast, the time throttled reported and kept out of the latencies."""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.metrics.throttle import peak_starts_per_s, throttled_request_rate
from loadgen.record import CellKey, Record
from loadgen.schedule.throttle import StartGate
from tests.conftest import run_loadgen

S = 1_000_000_000


def recs(starts_s: list[float]) -> list[Record]:
    return [Record(run_id="r", cell=CellKey(60, 4), seq=i, t_intended_ns=round(t * S)) for i, t in enumerate(starts_s)]


@pytest.mark.unit
@pytest.mark.parametrize("starts_s, peak, rate", [
    ([0.0] * 5 + [1.001] * 5 + [2.002] * 5, 5, 5.0),  # bursts of R at the ceiling: R
    ([i / 4 for i in range(13)], 5, 4.0),  # evenly spaced at 4/s: [0, 1] holds 5 starts, [0, 1) holds 4
    ([0.0, 0.5, 2.6, 2.7], 2, 1.0),  # a slow server: 2 starts in the first 2 whole seconds
    ([0.0, 0.3], 2, None),  # under 1 s of starts: no rate
])
def test_peak_and_achieved_rate(starts_s, peak, rate):
    assert peak_starts_per_s(recs(starts_s)) == peak
    assert throttled_request_rate(recs(starts_s)) == (pytest.approx(rate) if rate is not None else None)


@pytest.mark.unit
def test_a_fractional_rate_spaces_starts_evenly():
    async def starts() -> list[int]:
        gate, out = StartGate(2.5), []
        for _ in range(4):
            await gate.wait()
            out.append(time.monotonic_ns())
        return out

    t = asyncio.run(starts())
    assert min(b - a for a, b in zip(t, t[1:])) >= 0.4 * S  # 1/R apart, never closer


def max_in_any_window(starts_ns: list[int]) -> int:
    starts = sorted(starts_ns)
    return max(bisect_right(starts, t + S) - i for i, t in enumerate(starts))


@pytest.mark.sim
def test_the_ceiling_holds_and_is_reached(sim_factory, tmp_path):
    sim = sim_factory("--speed", "50")
    out = tmp_path / "r.json"
    proc = run_loadgen("--url", sim.url, "--concurrency", "8", "--contexts", "60", "--max-tokens", "4",
                       "--requests-per-cell", "45", "--warmup", "15", "--max-request-rate", "15", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "at most 15 request starts per second" in proc.stderr
    records = read_jsonl(str(out)[:-5] + ".requests.jsonl")
    assert len(records) == 60 and all(r["outcome"] == "ok" for r in records)
    # never more than R starts in any 1 s window, warmup (one second's worth) and measured load together
    assert max_in_any_window([r["t_intended_ns"] for r in records]) <= 15
    (cell,) = read_json(str(out))["cells"]
    t = cell["throttle"]
    # the server is fast (8 slots, 4 tokens): the ceiling, not the server, sets the pace, and it is reached
    assert t["peak_starts_per_s"] == 15
    assert t["achieved_request_rate"] == pytest.approx(15, rel=0.05)
    assert t["max_request_rate"] == 15 and t["throttled_starts"] > 0
    # the slots waited for seconds, and that wait is not counted as the server's latency
    assert t["throttled_s"] > 1.0 > cell["ttft_from_intended_s"]["p99"]
    assert 0 < t["throttled_fraction"] <= 1
    assert "request-rate ceiling:" in proc.stdout


@pytest.mark.unit
@pytest.mark.parametrize("extra, message", [
    (["--request-rate", "5"], "--max-request-rate caps closed-loop cells"),
    (["--workers", "2"], "--max-request-rate throttles the slots of one process"),
    (["--max-request-rate", "0"], "--max-request-rate 0: must be a finite number"),
])
def test_bad_ceilings_are_refused(tmp_path, extra, message, cli):
    args = ["--max-request-rate", "5", *extra] if "--max-request-rate" not in extra else extra
    proc = cli(*args, "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert message in proc.stderr
