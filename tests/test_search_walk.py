"""`loadgen search`'s walk as tables, against model servers made of result cells: the bracket and its
resolution, extensions of a probe not decided (only where the walk rests on it), contradictions measured again,
the re-check of the bracket's missed end, the control probe and drift (judged against the first measurement);
the cells a search takes, the caveats beside its answer; the Wilson interval, the knee that leaves out loads
that disagree, the answer's text within 120 columns and the live search gauges."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from exporters.search_metrics import SearchGauges
from loadgen.config import SloConfig
from loadgen.metrics.attainment import decided, wilson_interval
from loadgen.metrics.knee import knee
from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.compare_inputs import Run
from loadgen.search.probes import Probe, Role, SearchConfig, contradiction, first_requests, next_part, probe_key
from loadgen.search.result import search_section
from loadgen.search.state import state_of
from loadgen.search.text import capacity_ranking, search_text
from loadgen.search.walk import Walker, replay, walk

pytestmark = pytest.mark.unit


def cell(key: CellKey, n: int, attainment: float, tok_s: float, duration_s: float = 10.0, ttft_s: float = 0.1,
         early: bool = False, saturated: bool = False) -> CellResult:
    """A probe's cell as the results store it, read back: n scheduled requests, round(attainment × n) good."""
    good = round(attainment * n)
    client = {"client": {"saturated": True, "reasons": ["client CPU 97% > 90%"]}} if saturated else {}
    return from_json(key.as_dict() | client | {
        "status": "ok", "requests": {"ok": n, "failed": 0}, "duration_s": duration_s, "output_tok_s": tok_s,
        "ttft_s": {"p50": ttft_s}, "intervals": {"output_tok_s": [tok_s * 0.97, tok_s * 1.03],
                                                 "ttft_s.p50": [ttft_s * 0.95, ttft_s * 1.05]},
        "slo": {"good": good, "scheduled": n, "attainment": good / n, "attainment_required": 0.9,
                "met": good / n >= 0.9, "good_output_tok_s": tok_s * good / n},
        "incidents": [{"kind": "oversaturated", "reason": "stopped early: over-saturated"}] if early else []})


def slots(knee_c: float, per_slot_tok_s: float = 100.0):
    """A server that meets the SLO up to `knee_c` requests in flight and whose tok/s stops growing there."""
    def serve(key: CellKey, n: int, i: int) -> CellResult:
        c = key.concurrency if key.request_rate is None else key.request_rate
        return cell(key, n, 1.0 if c <= knee_c else 0.3, per_slot_tok_s * min(c, knee_c))
    return serve


def search(cfg: SearchConfig, serve) -> tuple[object, list, dict]:
    """Run the walk against `serve(key, requests, i)`: its bracket, the cells it asked for, the cells."""
    cells: dict[CellKey, CellResult] = {}
    asked = []
    g = walk(cfg, 60, cells.get)
    try:
        m = next(g)
        while True:
            asked.append(m)
            cells[m.key] = serve(m.key, m.requests, len(asked) - 1)
            m = g.send(None)
    except StopIteration as end:
        return end.value, asked, cells


@pytest.mark.parametrize("knee_c", [1, 3, 8, 13, 37, 64, 100, 300, 900])
def test_the_walk_brackets_bisects_and_rechecks_the_missed_end_in_at_most_12_cells(knee_c):
    cfg = SearchConfig()
    b, asked, cells = search(cfg, slots(knee_c))
    # growth 4 from 1 and 10 %: at most 5 probes up and 5 halvings, the re-check and one control probe
    assert b.complete and b.drift is None and len(asked) <= 12, [m.key.label() for m in asked]
    assert b.met <= knee_c < b.missed and cfg.width_ok(b.met, b.missed)
    rechecks = [m for m in asked if m.role is Role.RECHECK]
    assert [m.key for m in rechecks] == [probe_key(cfg, 60, b.missed, again=1)]  # measured again, agreed
    assert b.again and not b.again[-1].disagreed
    controls = [m for m in asked if m.role is Role.CONTROL]
    assert controls == [asked[-1]] and b.controls and not b.controls[-1].drifted  # at the end only, by default
    every = SearchConfig(drift_every=4)
    _, asked, _ = search(every, slots(knee_c))
    assert sum(m.role is Role.CONTROL for m in asked) == 1 + (len(asked) - 2) // 5  # also after every 4 probes


def test_a_clean_search_takes_at_most_12_cells_whatever_the_knee():
    # from 1 by ×4: at most 6 probes up (1 … 1024), 4 geometric bisections of a ×4 step to 10 %, the re-check
    # and the control probe
    cfg = SearchConfig()
    most = {}
    for knee_c in [*range(1, 101), *range(101, 1025, 3)]:
        b, asked, _ = search(cfg, slots(knee_c))
        assert b.complete and b.met <= knee_c and (b.missed is None or knee_c < b.missed), knee_c
        most[knee_c] = len(asked)
    assert max(most.values()) == 12 and most[64] == 11, {k: n for k, n in most.items() if n > 11}


def straddling(knee_c: float, at: float):
    """A server like `slots(knee_c)` whose load `at` meets with 92 % good, an interval that straddles 90 %."""
    normal = slots(knee_c)

    def serve(key: CellKey, n: int, i: int) -> CellResult:
        return cell(key, n, 0.92, 100 * at) if key.concurrency == at else normal(key, n, i)
    return serve


@pytest.mark.parametrize("knee_c, at, extended", [
    (64, 4, False),  # c=16 met beyond doubt: c=4's verdict decides nothing, it is not extended
    (64, 16, False),
    (16, 16, True),  # c=16 is the met end of the bracket 16–64: extended before the walk bisects it
    (4, 4, True),
])
def test_only_a_probe_the_walk_rests_on_is_extended(knee_c, at, extended):
    cfg = SearchConfig()
    b, asked, _ = search(cfg, straddling(knee_c, at))
    parts = [m for m in asked if m.role is Role.EXTEND]
    assert bool(parts) is extended and all(m.key.concurrency == at for m in parts), [m.key.label() for m in asked]
    assert b.complete and b.met <= knee_c < b.missed
    clean, clean_asked, _ = search(cfg, slots(knee_c))
    assert len(asked) == len(clean_asked) + len(parts)


@pytest.mark.parametrize("attainment", [1.0, 0.0])  # met, or plainly missed (no minimum seconds for itself)
def test_a_first_probe_too_short_to_judge_drift_is_extended_at_once(attainment):
    def serve(key: CellKey, n: int, i: int) -> CellResult:
        return cell(key, n, attainment, 100, duration_s=0.5 if i == 0 else 10.0) if key.concurrency <= 8 else \
            cell(key, n, 0.2, 800)
    cfg = SearchConfig(min_s=1)
    b, asked, cells = search(cfg, serve)
    assert [m.role for m in asked[:2]] == [Role.PROBE, Role.EXTEND] and asked[1].key == CellKey(60, 1, again=1)
    assert asked[1].requests == 96  # 1.2 × 1 s at 40 requests in 0.5 s: a part of its own long enough to judge
    assert asked[-1].control == CellKey(60, 1, again=1)  # the control's reference: the part long enough to judge


def test_limits_rates_and_a_first_probe_that_misses():
    b, asked, _ = search(SearchConfig(), slots(0))  # even concurrency 1 misses, twice
    assert [m.key for m in asked] == [CellKey(60, 1), CellKey(60, 1, again=1), CellKey(60, 1, again=2)]
    assert b.met is None and b.complete and asked[-1].role is Role.CONTROL
    b, _, _ = search(SearchConfig(limit=64, drift_every=0), slots(10_000))
    assert b.met == 64 and b.missed is None and "limit" in b.ended
    rate = SearchConfig(over=SearchOver.RATE, start=2.0, resolution=0.5, relative=False, min_s=1)
    b, asked, _ = search(rate, slots(11.3))
    assert b.met <= 11.3 < b.missed and b.missed - b.met <= 0.5 and len(asked) <= 16
    assert probe_key(rate, 60, 3.5, cap=16) == CellKey(60, 16, request_rate=3.5)


@pytest.mark.parametrize("name, parts, requests, capped", [
    # (attainment, duration_s) of each part the server gives → requests asked for each part, capped at the end
    ("all good: decided at once", [(1.0, 10)], [40], False),
    ("half good: decided at once", [(0.5, 10)], [40], False),
    ("short of the minimum seconds: extended by the time missing", [(1.0, 4), (1.0, 8)], [40, 72], False),
    ("missed, short of the minimum seconds: a miss needs none", [(0.5, 4)], [40], False),
    ("at the target: extended to the cap, then decided with a note", [(0.9, 10)] * 3, [40, 40, 80], True),
    ("straddling, then decided by the extensions", [(0.9, 10), (1.0, 10), (1.0, 10)], [40, 40, 80], False),
])
def test_a_probe_is_extended_until_its_attainment_is_decided(name, parts, requests, capped):
    cfg = SearchConfig()
    probe = Probe(1, Role.PROBE)
    asked = [first_requests(cfg, 1, None)]
    for attainment, duration_s in parts:
        probe.parts.append(cell(CellKey(60, 1, again=len(probe.parts)), asked[-1], attainment, 100, duration_s))
        n = next_part(cfg, probe)
        if n is None:
            break
        asked.append(n)
    assert asked == requests and probe.capped is capped and n is None, name


def test_an_early_stopped_probe_is_decided_and_the_first_part_fills_the_minimum_seconds():
    cfg = SearchConfig()
    stopped = Probe(16, Role.PROBE, [cell(CellKey(60, 16), 48, 0.2, 800, duration_s=2, early=True)])
    assert next_part(cfg, stopped) is None
    below = Probe(4, Role.PROBE, [cell(CellKey(60, 4), 40, 1.0, 400, duration_s=5)])  # 8 req/s at c=4
    assert first_requests(cfg, 16, below) == 192  # 1.2 × 10 s × 8 req/s × min(16 / 4, 2)
    assert first_requests(SearchConfig(over=SearchOver.RATE), 12.5, None) == 150  # 1.2 × 10 s × 12.5/s


def probe(load: float, attainment: float, tok_s: float) -> Probe:
    return Probe(load, Role.PROBE, [cell(CellKey(60, int(load)), 40, attainment, tok_s)])


@pytest.mark.parametrize("p, q, again", [
    (probe(5, 0.0, 57), probe(4, 1.0, 542), 5),  # the c=5 stall: missed, and tok/s fell by 90 %
    (probe(6, 0.2, 300), probe(8, 1.0, 800), 6),  # a lower load missed where a higher one met
    (probe(16, 0.1, 200), probe(4, 1.0, 500), 16),  # tok/s fell by more than half while the load grew
    (probe(16, 0.3, 810), probe(8, 1.0, 800), None),  # missed above a met load, throughput flat: consistent
    (probe(16, 0.1, 260), probe(4, 1.0, 500), None),  # tok/s fell by less than half
])
def test_contradictions_name_the_load_to_measure_again(p, q, again):
    found = contradiction(SearchConfig(), p, q)
    assert (found[0] if found else None) == again, found
    assert contradiction(SearchConfig(), q, p) == found  # either order


def paused_once(knee_c: float, at: int):
    """A server like `slots(knee_c)` that stalls for the whole of its `at`-th cell (nothing met, a tenth of
    its throughput), once."""
    normal = slots(knee_c)

    def serve(key: CellKey, n: int, i: int) -> CellResult:
        return cell(key, n, 0.05, 10.0, ttft_s=8.0) if i == at else normal(key, n, i)
    return serve


@pytest.mark.parametrize("knee_c, at", [(8, at) for at in range(8)] + [(64, at) for at in range(11)])  # each cell
def test_a_server_that_stalls_once_inside_any_probe_gives_the_same_answer(knee_c, at):
    cfg = SearchConfig()
    clean, clean_asked, _ = search(cfg, slots(knee_c))
    b, asked, _ = search(cfg, paused_once(knee_c, at))
    assert (b.met, b.missed, b.complete) == (clean.met, clean.missed, True), [m.key.label() for m in asked]
    assert len(asked) <= len(clean_asked) + 1  # the stalled cell measured again (a control: confirmed)
    if asked[at].role is not Role.CONTROL:  # the stalled probe was measured again, and they disagreed
        assert any(a.load == asked[at].key.concurrency and a.disagreed for a in b.again), b.again


def test_a_stalled_probe_past_the_missed_end_is_not_measured_again():
    # c=11 stalls after c=10 missed beside it: it is past the missed end, its verdict decides nothing
    cells: dict[CellKey, CellResult] = {}
    for load, attainment, tok_s in ((1, 1.0, 100), (4, 1.0, 400), (8, 1.0, 800), (10, 0.3, 800), (11, 0.05, 10)):
        cells[CellKey(60, load)] = cell(CellKey(60, load), 40, attainment, tok_s)
    walker = Walker(SearchConfig(), 60)
    for key, c in cells.items():
        probe = Probe(key.concurrency, Role.PROBE, [c])
        walker._measured(probe, "")
    assert walker.next_step() == (9, Role.PROBE, "")  # bisected; 11, past the missed end 10, is left as it is
    walker.b.latest.pop(10)
    assert walker.next_step()[:2] == (11, Role.AGAIN)  # once it is the missed end, it is measured again


def slower_after(knee_c: float, cells_before: int, factor: float = 8.0):
    def serve(key: CellKey, n: int, i: int) -> CellResult:
        c = key.concurrency
        f = factor if i >= cells_before else 1.0
        return cell(key, n, 1.0 if c <= knee_c and f == 1 else 0.1, 100 * min(c, knee_c) / f, ttft_s=0.1 * f)
    return serve


def fast_first_cell(factor: float = 7.0):
    """The issue's server: 7× slower from inside the first probe on, for good. Its first cell (4 s, short of the
    10 s minimum) is wholly fast and meets; every later cell is slow and misses, c=1 too."""
    def serve(key: CellKey, n: int, i: int) -> CellResult:
        if i == 0:
            return cell(key, n, 1.0, 267.0, duration_s=4.0, ttft_s=0.01)
        return cell(key, n, 0.0, 267.0 * min(key.concurrency, 4) / factor, ttft_s=0.07)
    return serve


def test_a_server_slowed_inside_the_first_probe_gives_no_answer_and_says_it_drifted():
    cfg = SearchConfig()
    b, asked, cells = search(cfg, fast_first_cell())
    # c=1 measured again as a probe (its missed end) was the slow server: the control is judged against c=1's
    # first measurement, not its latest
    assert any(a.load == 1 and a.disagreed for a in b.again), [m.key.label() for m in asked]
    assert b.drift is not None and b.drift.factor > 2 and not b.complete, b.ended
    assert asked[-1].role is Role.CONTROL and asked[-1].control == CellKey(60, 1) and asked[-1].confirms
    text = search_text(cfg, SloConfig({"ttft": 0.05}), [60], list(cells.values()))
    assert "no answer: the server drifted" in text and "7.0× slower" in text and "caveat" not in text
    section = search_section(cfg, SloConfig({"ttft": 0.05}), [60], list(cells.values()))["answers"]["60"]
    assert section["met"] is None and section["drift"]["drifted"] and not section["complete"]


@pytest.mark.parametrize("cells_before", [1, 2, 4, 6, 7])  # 7: the control at the end, of 8
def test_a_server_that_gets_slower_for_good_gives_no_answer_and_says_it_drifted(cells_before):
    b, asked, cells = search(SearchConfig(), slower_after(8, cells_before))
    assert b.drift is not None and not b.complete and "8.0× slower" in b.drift.sentence, b.ended
    assert asked[-1].role is Role.CONTROL and asked[-1].control == CellKey(60, 1)
    section = search_section(SearchConfig(), SloConfig({"ttft": 0.2}), [60], list(cells.values()))["answers"]["60"]
    assert section["met"] is None and not section["complete"] and section["drift"]["drifted"]
    text = search_text(SearchConfig(), SloConfig({"ttft": 0.2}), [60], list(cells.values()))
    assert "no answer: the server drifted" in text and "8.0× slower" in text


def test_replay_of_stored_cells_gives_the_walks_answer_and_stops_at_a_missing_cell():
    cfg = SearchConfig(start=2, growth=2)
    b, asked, cells = search(cfg, paused_once(13, 3))
    again = replay(cfg, 60, cells)
    assert (again.met, again.missed, again.probes, again.complete) == (b.met, b.missed, b.probes, True)
    assert [(a.load, a.disagreed) for a in again.again] == [(a.load, a.disagreed) for a in b.again]
    del cells[asked[-2].key]
    partial = replay(cfg, 60, cells)
    assert not partial.complete and "could not be used" in partial.ended


def test_an_answer_says_beside_it_what_it_rests_on():
    cfg, slo = SearchConfig(), SloConfig({"ttft": 0.2, "tpot": 0.02})
    b, asked, cells = search(cfg, paused_once(8, 3))  # c=8, the met end, stalled first: measured again, met
    assert [m.key.label() for m in asked][3:5] == ["ctx=60 c=8", "ctx=60 c=8 #2"]
    text = search_text(cfg, slo, [60], list(cells.values()))
    lines = text.splitlines()
    assert lines[1].startswith("ctx=60: highest concurrency that meets the SLO: 8 ")
    assert lines[2].startswith("  caveat the met end c=8 rests on a re-measurement that disagreed"), text
    assert "5% good, 10.0 tok/s → 100% good, 800.0 tok/s): the second counts" in " ".join(text.split())
    found = search_section(cfg, slo, [60], list(cells.values()))["answers"]["60"]["caveats"]
    assert [(c["end"], c["load"], c["kind"]) for c in found] == [("met", 8, "disagreed")]

    def saturated(key: CellKey, n: int, i: int) -> CellResult:
        c = key.concurrency
        return cell(key, n, 1.0 if c <= 8 else 0.3, 100 * min(c, 8), saturated=c == 9)
    b, asked, cells = search(cfg, saturated)
    text = search_text(cfg, slo, [60], list(cells.values()))
    assert "caveat the missed end c=9 rests on its cell whose client fell behind (CLIENT SATURATED" in \
        " ".join(text.split()) and "client CPU 97% > 90%" in text, text
    found = search_section(cfg, slo, [60], list(cells.values()))["answers"]["60"]["caveats"]
    assert [(c["end"], c["load"], c["kind"]) for c in found] == [("missed", 9, "client_saturated")]
    assert all(len(line) <= 120 for line in text.splitlines())
    _, _, cells = search(cfg, slots(8))  # nothing to say: no caveat
    assert "caveat" not in search_text(cfg, slo, [60], list(cells.values()))
    assert search_section(cfg, slo, [60], list(cells.values()))["answers"]["60"]["caveats"] == []


def test_the_sweeps_capacity_ranking_names_an_answers_caveats():
    cfg, slo = SearchConfig(), SloConfig({"ttft": 0.2})
    runs = []
    for name, serve in (("stalled", paused_once(8, 3)), ("clean", slots(8))):
        _, _, cells = search(cfg, serve)
        runs.append(Run(name, f"{name}.json", {"search": search_section(cfg, slo, [60], list(cells.values()))}))
    text = capacity_ranking(runs)
    stalled, clean = text.split("\n  ctx=60")[1:]  # one entry each, wrapped at 120 columns
    assert stalled.split()[:3] == ["stalled", "8", "(missed"] and stalled.endswith("caveats: met end disagreed")
    assert clean.split()[:3] == ["clean", "8", "(missed"] and "caveat" not in clean
    assert all(len(line) <= 120 for line in text.splitlines())


def test_the_answer_text_shows_both_measurements_within_120_columns():
    cfg = SearchConfig()
    _, _, cells = search(cfg, paused_once(8, 3))
    text = search_text(cfg, SloConfig({"ttft": 0.2, "tpot": 0.02}), [60], list(cells.values()))
    assert all(len(line) <= 120 for line in text.splitlines()), text
    assert "  again  c=8 " in text and "disagreed, the second counts" in text
    assert "ctx=60: highest concurrency that meets the SLO: 8 " in text


def test_wilson_interval_decides_only_beyond_noise():
    low, high = wilson_interval(40, 40)
    assert low == pytest.approx(40 / (40 + 1.96 ** 2)) and high == 1.0
    assert decided(40, 40, 0.9) is True and decided(34, 34, 0.9) is None and decided(0, 40, 0.9) is False
    assert decided(36, 40, 0.9) is None and wilson_interval(0, 0) is None


def test_the_knee_leaves_out_a_concurrency_whose_measurements_disagree():
    found = knee([(1, 100), (4, 542), (5, 57), (8, 560), (5, 548)])
    assert found["left_out"] == [[5, 57, 548]] and found["knee"] == 4
    assert knee([(4, 500), (4, 520), (8, 900)])["left_out"] == []  # agreeing measurements: the first counts


def test_search_gauges_follow_the_state_and_the_answer_appears_once_answered():
    registry = CollectorRegistry()
    gauges = SearchGauges(registry)
    cfg = SearchConfig()
    b, _, cells = search(cfg, slots(8))
    partial = replay(cfg, 60, {k: v for k, v in list(cells.items())[:3]})

    def value(name: str):
        return registry.get_sample_value(name, {"ctx": "60", "over": "concurrency"})
    gauges.search_state(state_of(partial, 60, cfg.over, 8))
    assert value("loadgen_search_probe_load") == 8 and value("loadgen_search_missed_load") == 16
    assert value("loadgen_search_answer") is None and value("loadgen_search_probes_measured") == 3
    gauges.search_state(state_of(b, 60, cfg.over, None))
    assert value("loadgen_search_answer") == 8 and value("loadgen_search_probe_load") is None
    assert value("loadgen_search_drifted") == 0 and value("loadgen_search_met_load") == 8
