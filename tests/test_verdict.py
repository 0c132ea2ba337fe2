"""The verdict across configurations (loadgen/results/verdict.py, verdict_why.py, report/verdict_text.py) on
hand-made results whose answer is known: who wins, by how much, ties, who may not compete, the why."""

from __future__ import annotations

import math
import random

import pytest

from loadgen.metrics import verify_steps as vs
from loadgen.record import CellKey
from loadgen.report.compare import Run
from loadgen.report.verdict_text import region_text, regions, verdict_lines
from loadgen.results.objectives import Objective
from loadgen.results.schema_doc import VERDICT_FIELDS
from loadgen.results.verdict import BetweenRuns, Decision, Estimate, decide, margin, verdicts
from loadgen.results.verdict_why import why_text
from tests.cells import typed

pytestmark = pytest.mark.unit


def cell(conc: int, tok_s: float, half: float | None = None, *, accept: float | None = None,
         step_s: float | None = None, full: float | None = None, ctx: int = 60, **extra: object) -> dict:
    """A measured cell of `tok_s` output tok/s (± `half`, its 95 % interval), with speculative figures."""
    out = {"context_tokens": ctx, "concurrency": conc, "requests": {"ok": 64, "failed": 0}, "output_tok_s": tok_s,
           "intervals": {"output_tok_s": [tok_s - half, tok_s + half]} if half else {}}
    if accept is not None:
        out["accept_length"] = {"value": accept, "source": "per_request"}
    if step_s is not None:
        out["steps"] = {"step_itl_s": {"mean": step_s}}
    if full is not None:
        out["accept_by_position"] = [{"position": 0, "rate": 0.9}, {"position": 1, "rate": full}]
    return out | extra


def run(name: str, *cells: dict, info: dict | None = None, params: dict | None = None) -> Run:
    doc = {"target": {"engine": "sglang", "server_info": info or {}}, "sweep": {"params": params or {}}}
    return Run(name, f"{name}.json", doc, {CellKey(c["context_tokens"], c["concurrency"]): typed(c) for c in cells})


def output(vs_: list) -> list:
    return [v for v in vs_ if v.objective is Objective.OUTPUT_TOK_S]


def test_a_clear_winner_its_margin_and_interval():
    a, b = Estimate("a", 120, (114, 126), (120,)), Estimate("b", 100, (95, 105), (100,))
    decision, tied, runner, m = decide([a, b], True, 0.02)
    assert (decision, tied, runner) == (Decision.WINS, [], "b")
    assert m is not None and m.value == pytest.approx(0.2) and m.interval is not None
    se = math.hypot(math.log(126 / 114), math.log(105 / 95)) / (2 * 1.96)
    assert m.interval == pytest.approx((math.exp(math.log(1.2) - 1.96 * se) - 1, math.exp(math.log(1.2) + 1.96 * se) - 1))
    lower = margin(Estimate("a", 80, (76, 84), (80,)), b, higher_is_better=False)  # lower is better: 100/80 − 1
    assert lower.value == pytest.approx(0.25)


def test_exact_equals_and_small_or_noisy_differences_are_tied_never_ranked():
    same = [Estimate("a", 100, (98, 102), (100,)), Estimate("b", 100, (98, 102), (100,))]
    assert decide(same, True, 0.02)[:2] == (Decision.TIED, ["a", "b"])
    tight = [Estimate("a", 101.5, (101.4, 101.6), (101.5,)), Estimate("b", 100, (99.9, 100.1), (100,))]
    assert decide(tight, True, 0.02)[0] is Decision.TIED  # +1.5 % beyond noise, below the 2 % resolution
    assert decide(tight, True, 0.01)[0] is Decision.WINS
    noisy = [Estimate("a", 110, (90, 130), (110,)), Estimate("b", 100, (95, 105), (100,)),
             Estimate("c", 50, (45, 55), (50,))]
    decision, tied, runner, _ = decide(noisy, True, 0.02)
    assert (decision, tied, runner) == (Decision.TIED, ["a", "b"], "b")  # c is beaten: not in the tie


def test_the_margin_interval_covers_the_true_margin_95_percent_of_the_time():
    """Two configurations measured with lognormal noise of known size: the interval covers the true margin in
    about 95 % of 2,000 draws (binomial 95 % band of 2,000 draws at p = 0.95: 0.940–0.960)."""
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        sa, sb = rng.uniform(0.01, 0.05), rng.uniform(0.01, 0.05)
        xa, xb = 130 * math.exp(rng.gauss(0, sa)), 100 * math.exp(rng.gauss(0, sb))
        a = Estimate("a", xa, (xa * math.exp(-1.96 * sa), xa * math.exp(1.96 * sa)), (xa,))
        b = Estimate("b", xb, (xb * math.exp(-1.96 * sb), xb * math.exp(1.96 * sb)), (xb,))
        m = margin(a, b, True)
        assert m.interval is not None
        covered += m.interval[0] <= 0.3 <= m.interval[1]
    assert 0.935 <= covered / 2000 <= 0.965


def test_regions_merge_loads_with_the_same_answer_and_name_the_ties():
    runs = [run("b64t8", cell(1, 300, 6), cell(8, 1500, 30), cell(32, 3000, 60), cell(64, 3500, 70)),
            run("b16t8", cell(1, 250, 5), cell(8, 1200, 25), cell(32, 3300, 60), cell(64, 3520, 70)),
            run("b8t4", cell(1, 150, 3), cell(8, 800, 16), cell(32, 2500, 50), cell(64, 3000, 60))]
    found = output(verdicts(runs))
    texts = [region_text(r) for r in regions(found)]
    assert texts[0].startswith("b64t8 wins from c=1 to c=8 (+20% to +25%)")
    assert texts[1] == "b16t8 wins at c=32 (3300.0 vs 3000.0 tok/s: +10% [+7.1%, +13%])"  # checkable by hand
    assert texts[2].startswith("at c=64 b16t8 and b64t8 are tied (+0.6% [-") and \
        texts[2].endswith("within noise), ahead of b8t4 by +17% [+14%, +21%]")  # how far the tie leads the rest
    ties = [run("n2", cell(1, 57.5, 2), cell(2, 90, 3)), run("n4", cell(1, 56.7, 2), cell(2, 89, 3)),
            run("none", cell(1, 45.8, 1.5), cell(2, 70, 2))]
    (tie,) = regions(output(verdicts(ties)))
    assert region_text(tie) == "from c=1 to c=2 n2 and n4 are tied (within noise), ahead of none by +26% to +29%"
    lines = verdict_lines(verdicts(runs))
    assert lines[0].startswith("The answer") and "prompt 60 tokens:" in lines


def test_margins_only_against_eligible_configurations_the_others_listed_with_their_reason():
    saturated = cell(32, 9000, 90, client={"saturated": True, "reasons": ["client CPU 95% > 90%"]})
    cut = cell(32, 8000, 80, incidents=[{"kind": "interrupted", "reason": "stopped early: 35 measured requests "
                                                                          "not sent"}])
    failed = cell(32, 0, status="failed", error="the server went away")
    runs = [run("fast_but_saturated", saturated), run("cut", cut), run("gone", failed),
            run("b16", cell(32, 3000, 30)), run("b8", cell(32, 2000, 20))]
    (v,) = output(verdicts(runs))
    assert (v.decision, v.winner, v.runner_up) == (Decision.WINS, "b16", "b8")
    assert v.margin is not None and v.margin.value == pytest.approx(0.5)
    reasons = dict(v.ineligible)
    assert reasons["fast_but_saturated"].startswith("client saturated")
    assert reasons["cut"] == "cut short: stopped early: 35 measured requests not sent"
    assert reasons["gone"] == "the server went away"
    assert v.to_json()["ineligible"][0] == {"config": "fast_but_saturated", "reason": reasons["fast_but_saturated"]}


def test_repeated_measurements_pool_and_their_drift_widens_the_interval():
    steady = [run("a", cell(8, 1000, 10)), run("a#2", cell(8, 1002, 10)), run("b", cell(8, 950, 10))]
    (v,) = output(verdicts(steady))
    assert v.decision is Decision.WINS and v.ranked[0].measurements == (1000, 1002)
    drifted = [run("a", cell(8, 1000, 10)), run("a#2", cell(8, 900, 10)), run("b", cell(8, 930, 10))]
    (v,) = output(verdicts(drifted))
    assert v.decision is Decision.TIED  # a's measurements 1000 and 900 disagree far beyond their own ±10
    low, high = v.ranked[0].interval or (0, 0)
    assert high - low > 300


def test_why_decomposes_tok_s_into_accept_length_and_verify_steps():
    wide = cell(1, 300, 6, accept=12.0, step_s=0.040, full=0.08)
    narrow = cell(1, 200, 4, accept=4.0, step_s=0.020, full=0.45)
    (v,) = output(verdicts([run("wide", wide), run("narrow", narrow)]))
    w = v.why
    assert w is not None and (w.leader, w.runner_up) == ("wide", "narrow")
    assert w.configs["wide"].verify_steps_per_s == pytest.approx(25.0)  # 300 / 12
    assert w.accept_ratio == pytest.approx(3.0) and w.steps_ratio == pytest.approx(0.5)
    assert w.net_ratio == pytest.approx(w.accept_ratio * w.steps_ratio)  # tok/s = accept × steps/s, exactly
    assert w.configs["wide"].step_ms == pytest.approx(40.0) and w.configs["wide"].full_draft_share == 0.08
    assert w.limit is vs.DraftLimit.DRAFTER
    text = why_text(w)
    assert "accept length 12.00 vs 4.00 (×3.00)" in text and "40.0 vs 20.0 ms a step" in text
    assert "longer accepted drafts outweigh its slower verify steps" in text and "drafter limits" in text
    # the other way round: the narrow draft's faster steps win at load
    (v,) = output(verdicts([run("wide", cell(32, 2000, 20, accept=12.0)), run("narrow", cell(32, 3000, 30, accept=4.0))]))
    assert v.why is not None and "the larger draft costs more than its extra tokens" in why_text(v.why)
    assert vs.draft_limit(0.45) is vs.DraftLimit.DRAFT_SIZE and vs.draft_limit(None) is vs.DraftLimit.UNKNOWN


def test_engine_settings_that_differ_beyond_the_swept_ones_are_confounders():
    a = run("b64", cell(1, 300, 3), info={"disable_cuda_graph": True, "tp_size": 8, "speculative_ddtree_budget": 64},
            params={"budget": 64})
    b = run("b16", cell(1, 200, 2), info={"disable_cuda_graph": False, "tp_size": 8, "speculative_ddtree_budget": 16},
            params={"budget": 16})
    c = run("b32", cell(1, 100, 2), info={"disable_cuda_graph": False, "tp_size": 8}, params={"budget": 32})
    (v,) = output(verdicts([c, a, b]))
    assert v.why is not None and v.why.confounders == ["disable_cuda_graph: True for b64; False for b16, b32"]  # ranked order
    assert "confounders" in why_text(v.why)
    swept = run("m256", cell(1, 150, 2), info={"max_running_requests": 256}, params={"max_running_requests": 256})
    other = run("m64", cell(1, 100, 2), info={"max_running_requests": 64}, params={"max_running_requests": 64})
    (v,) = output(verdicts([swept, other]))
    assert v.why is not None and v.why.confounders == []  # swept: the configuration itself


def test_json_entry_has_the_documented_keys():
    (v,) = output(verdicts([run("a", cell(8, 1200, 12)), run("b", cell(8, 1000, 10))]))
    entry = v.to_json()
    assert set(entry) == set(VERDICT_FIELDS)  # docs/results.md documents every key
    assert (entry["context"], entry["concurrency"], entry["rate"], entry["objective"]) == (60, 8, None, "output_tok_s")
    assert entry["winner"] == "a" and entry["margin_interval"][0] > 0


def test_the_drift_controls_noise_between_runs_widens_one_measurement_intervals():
    """Two configurations 5 % apart, each cell's own interval ±1 %: a win; with drift controls that moved 6 % and
    4 % between runs, s_run = √((ln 1.06² + ln 1.04²) / 4) ≈ 3.6 % (× t(0.975, 2) / 1.96 for its 2 degrees of
    freedom), and the same 5 % is a tie."""
    a, b = cell(8, 1050, 10.5), cell(8, 1000, 10)
    (v,) = output(verdicts([run("a", a), run("b", b)]))
    assert v.decision is Decision.WINS
    assert v.to_json()["between_runs"] == {"relative_se": None, "controls": 0, "repeated": 0, "df": 0}
    runs = [run("a", a), run("b", b)]
    runs[0].doc["drift"] = {"first": {"output_tok_s": 1060}, "again": {"output_tok_s": 1000}}
    runs[1].doc["drift"] = {"first": {"output_tok_s": 1000}, "again": {"output_tok_s": 1040}}
    between = BetweenRuns.of(runs, "output_tok_s")
    assert between.controls == 2
    assert between.relative_se == pytest.approx(math.sqrt((math.log(1.06) ** 2 + math.log(1 / 1.04) ** 2) / 4))
    (v,) = output(verdicts(runs))
    assert v.decision is Decision.TIED and v.tie_reason == "within noise"
    low, high = v.ranked[0].interval or (0, 0)
    s_run = between.relative_se * 4.303 / 1.96  # t(0.975, 2 degrees of freedom) for the two controls
    assert math.log(high / low) / (2 * 1.96) == pytest.approx(math.hypot(math.log(1060.5 / 1039.5) / 3.92, s_run),
                                                              rel=1e-6)
    assert "Noise between runs: ±" in "\n".join(verdict_lines(verdicts(runs)))


def test_a_configuration_without_a_draft_decodes_one_token_a_step():
    """llama-server without -md reports no accept length: it is 1 by definition, so the why still decomposes."""
    none = run("no_draft", cell(4, 96.8, 2, step_s=0.0344))
    draft = run("n_max2", cell(4, 80.0, 2, accept=2.15, step_s=0.0786))
    draft.doc["target"]["spec"] = {"speculative_draft_n_max": 2}
    (v,) = output(verdicts([none, draft]))
    w = v.why
    assert w is not None and w.configs["no_draft"].accept_length == 1.0 and w.limit is vs.DraftLimit.NO_DRAFT
    assert w.accept_ratio == pytest.approx(1 / 2.15) and w.net_ratio == pytest.approx(96.8 / 80.0)
    text = why_text(w)
    assert "no_draft's plain decode steps come ×2.60 as often as n_max2's drafting and verifying, more than " \
           "n_max2's ×2.15 tokens a step make up: drafting does not pay here. no_draft decodes without a draft" in text
    assert "drafting and verifying" in text


def test_a_leader_that_delivers_less_output_is_not_said_to_outweigh_anything():
    slow = cell(2, 90, 2, accept=2.9, request_tok_s={"mean": 50.0}, intervals={
        "output_tok_s": [88, 92], "request_tok_s.mean": [49, 51]})
    fast = cell(2, 95, 2, accept=2.1, request_tok_s={"mean": 40.0}, intervals={
        "output_tok_s": [93, 97], "request_tok_s.mean": [39, 41]})
    (v,) = [x for x in verdicts([run("a", slow), run("b", fast)]) if x.objective is Objective.REQUEST_TOK_S]
    assert v.winner == "a" and v.why is not None
    assert "delivers ×0.95 the output tok/s of b: it leads here, not by throughput" in why_text(v.why)
    assert "outweigh" not in why_text(v.why)
    (ttft,) = [x for x in verdicts([run("a", slow), run("b", fast)]) if x.objective is Objective.TTFT_P50_S] or [None]
    assert ttft is None or ttft.why is None  # TTFT's answer carries no throughput decomposition


def test_ineligible_reasons_per_load_and_a_busy_machine_named():
    busy = {"saturated": True, "reasons": ["event-loop lag p99 13.1 ms > 10 ms"], "lag_total_s": 5.0,
            "runqueue_wait_s": 4.0}
    runs = [run("x", cell(1, 10, 1, client=busy), cell(2, 20, 1, client=busy | {"reasons": ["event-loop lag p99 "
                                                                                          "16.5 ms > 10 ms"]})),
            run("y", cell(1, 12, 1), cell(2, 22, 1)), run("z", cell(1, 11, 1), cell(2, 21, 1))]
    lines = [line for line in verdict_lines(output(verdicts(runs)), 400) if "could not compete" in line]
    assert lines == ["  could not compete: x: at c=1: client saturated: event-loop lag p99 13.1 ms > 10 ms (the machine "
                     "was busy: other processes kept the client's loop waiting 4.0 s for a core); at c=2: client "
                     "saturated: event-loop lag p99 16.5 ms > 10 ms (the machine was busy: other processes kept the "
                     "client's loop waiting 4.0 s for a core)"]


def test_repeated_configurations_serialise_to_json():
    """Pooled measurements' intervals come from numpy (t over the values): the JSON is plain floats."""
    import orjson
    (v,) = output(verdicts([run("a", cell(8, 1000, 10)), run("a#2", cell(8, 990, 10)), run("b", cell(8, 700, 9))]))
    assert orjson.loads(orjson.dumps(v.to_json()))["estimates"][0]["interval"][0] > 0


def test_repeated_measurements_pool_one_noise_between_runs_over_every_configuration():
    """Two sweeps of four configurations: each configuration's two values give 1 degree of freedom, four give 4;
    the pooled noise (not each configuration's own t with 1 df, t = 12.7) keeps a steady 15 % lead a win, and
    ranks by value, not by how steady each configuration was."""
    first = {"none": 397, "n2": 348, "n4": 334, "n8": 339}
    second = {"none": 405, "n2": 352, "n4": 340, "n8": 330}
    runs = [run(n, cell(1, v, v * 0.02)) for n, v in first.items()] + \
           [run(f"{n}#2", cell(1, v, v * 0.02)) for n, v in second.items()]
    (v,) = output(verdicts(runs))
    assert (v.decision, v.winner) == (Decision.WINS, "none")
    assert (v.between.repeated, v.between.df, v.between.controls) == (4, 4, 0)
    assert [e.config for e in v.ranked] == ["none", "n2", "n4", "n8"]
    assert "from 4 configurations measured again" in " ".join(verdict_lines(verdicts(runs), 400))


def test_a_configuration_that_measured_nothing_is_listed_with_its_sweep_reason():
    crashed = Run("b64", "b64.json", {"sweep": {"attempts": [{"reason": "reconfigure failed: exit 3"}]}}, {})
    (v,) = output(verdicts([run("a", cell(8, 1200, 12)), run("b", cell(8, 1000, 10)), crashed]))
    assert ("b64", "measured nothing: reconfigure failed: exit 3") in v.ineligible
