"""--verify's pure parts: garbage judged on an output alone, divergence from a reference, the cell's correctness
part and its incidents, the answers of the three APIs, the simulator's output faults, the live gauges, the
sweep's [verify] table, and bad input (exit 2 before any load)."""

from __future__ import annotations

import orjson
import pytest
from prometheus_client import CollectorRegistry

from exporters.verify_metrics import VerifyGauges
from loadgen.client.verify_request import VerifyOutput, read_output, verify_body
from loadgen.config import VerifyConfig
from loadgen.errors import UsageError
from loadgen.metrics.correctness import (
    divergence_tokens,
    first_divergence,
    fractions,
    garbage,
    repetition_loop,
    verdict,
)
from loadgen.names import Api, CellStatus, GarbageReason, Outcome, Phase, TokenUnit, VerifyMode
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_result import from_json
from loadgen.results.cell_status import not_best
from loadgen.results.correctness import Verification, verify_text
from loadgen.schedule.jobs import Inserted, JobList
from loadgen.sim.outputs import Output, OutputFaults, clean_token
from loadgen.sweep.spec import parse_spec
from loadgen.verify.prompts import BUILT_IN, load_prompts, prompts_digest
from loadgen.verify.reference import Reference, check_matches, load_reference

pytestmark = pytest.mark.unit


def out(tokens=None, text=None, n=None, finish="length", unit=TokenUnit.IDS) -> VerifyOutput:
    text = text if text is not None else "".join(f" w{t}" for t in tokens or [])
    return VerifyOutput(text, tokens, unit if tokens is not None else TokenUnit.TEXT,
                        n if n is not None else len(tokens or []), finish)


# ---- garbage, judged on the output alone ------------------------------------------------------------------
@pytest.mark.parametrize("tokens,found", [
    ([7] * 30, (1, 0)),                                   # one token to the end
    (list(range(10)) + [1, 2, 3] * 10, (3, 10)),           # a 3-gram from token 10
    (list(range(40)), None),                               # no repeat
    (list(range(50)) + [1, 2] * 5, None),                  # 10 looped tokens: under LOOP_MIN_TOKENS
    ([1, 2, 3, 4, 5, 6, 7, 8] * 3, None),                  # an 8-gram 3 times: under LOOP_REPEATS
    ([1, 2, 3, 4, 5, 6, 7, 8] * 4, (8, 0)),
])
def test_repetition_loop(tokens, found):
    assert repetition_loop(tokens) == found


def test_each_garbage_reason_with_its_example():
    assert garbage(out([], text=""), 64)[0] is GarbageReason.EMPTY
    assert garbage(out(text="  \n", n=3), 64)[0] is GarbageReason.EMPTY
    bad = garbage(out(text="fine until \ufffd\ufffd here", n=60), 64)
    assert bad[0] is GarbageReason.REPLACEMENT_CHARACTERS and "\ufffd" in bad[1]
    loop = garbage(out(list(range(8)) + [5, 6] * 20), 64)
    assert loop[0] is GarbageReason.REPETITION_LOOP and loop[1].startswith("2-gram ×20 from token 8")
    assert garbage(out(list(range(10))), 64) == (GarbageReason.CUT_SHORT, "10 of 64 tokens, finish reason length")
    assert garbage(out(list(range(10)), finish=None), 64)[0] is GarbageReason.CUT_SHORT
    assert garbage(out(list(range(10)), finish="stop"), 64) is None  # the model ended it: short is fine
    assert garbage(out(list(range(64))), 64) is None
    # text only: the text's pieces loop
    assert garbage(out(text="Sure! " + "the cat " * 20, n=45), 64)[0] is GarbageReason.REPETITION_LOOP


def test_invalid_utf8_becomes_replacement_characters_and_is_garbage():
    raw = b'{"choices": [{"message": {"content": "ok \xff\xfe then"}, "finish_reason": "length"}], ' \
          b'"usage": {"completion_tokens": 64}}'
    got = read_output(Api.OPENAI_CHAT, raw)
    assert "\ufffd" in got.text and garbage(got, 64)[0] is GarbageReason.REPLACEMENT_CHARACTERS


# ---- divergence from the reference ----------------------------------------------------------------------
def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2
    assert first_divergence([], [5]) == 0


def test_divergence_in_tokens_and_from_text():
    ref, got = out(list(range(64))), out(list(range(48)) + [99] * 16)
    assert divergence_tokens(ref, got) == 48
    # text only: 10 pieces of 20 tokens' text differ from piece 5 → token 10
    a = VerifyOutput(" a b c d e f g h i j", None, TokenUnit.TEXT, 20, "length")
    b = VerifyOutput(" a b c d e X g h i j", None, TokenUnit.TEXT, 20, "length")
    assert divergence_tokens(a, b) == 10 and divergence_tokens(a, a) is None


def test_verdicts_and_fractions():
    ref = out(list(range(64)))
    vs = [verdict(0, out(list(range(64))), ref, 64), verdict(1, out(list(range(50)) + [1] * 14), ref, 64),
          verdict(2, out([3] * 64), ref, 64), verdict(3, out(list(range(64))), None, 64)]
    assert [v["exact"] for v in vs] == [True, False, False, None]
    assert [v["garbage"] for v in vs] == [None, None, GarbageReason.REPETITION_LOOP, None]
    assert vs[1]["divergence"] == 50
    assert fractions(vs) == (4, 1 / 3, 1 / 4)
    assert fractions([]) == (0, None, None)


# ---- the cell: its correctness part, incidents, table text, never best -----------------------------------
def verify_record(seq: int, v: dict | None, ok: bool = True, tokens: int = 64) -> Record:
    return Record(run_id="r", cell=CellKey(60, 8), seq=seq, phase=Phase.VERIFY, t_sent_ns=1, t_end_ns=2,
                  outcome=Outcome.OK if ok else Outcome.HTTP_ERROR, completion_tokens=tokens if ok else None,
                  verify=v)


def verification(recs: list[Record], cfg: VerifyConfig) -> Verification:
    """The cell's verification as the run's verifier hands it to the builder (against the run-start reference)."""
    return Verification(recs, cfg.mode, "run_start", cfg.max_tokens, cfg.max_garbage_fraction)


def measured(n: int = 8) -> list[Record]:
    return [Record(run_id="r", cell=CellKey(60, 8), seq=i, t_sent_ns=1_000, t_first_token_ns=2_000,
                   t_last_token_ns=9_000, t_end_ns=10_000, completion_tokens=100, prompt_tokens=60, chunks=10,
                   chunk_tokens=[10] * 10, chunk_gaps_ns=[700] * 9) for i in range(n)]


def cell_of(verdicts: list[dict], mode=VerifyMode.GARBAGE, limit: float = 0.0, failed: int = 0) -> dict:
    recs = [verify_record(i, v) for i, v in enumerate(verdicts)]
    recs += [verify_record(100 + i, None, ok=False) for i in range(failed)]
    cfg = VerifyConfig(mode=mode, max_tokens=64, max_garbage_fraction=limit)
    return build_cell(CellKey(60, 8), measured(), verification=verification(recs, cfg)).to_json()


REF = out(list(range(64)))
CLEAN = verdict(0, out(list(range(64))), REF, 64)
DRIFTED = verdict(1, out(list(range(48)) + list(range(100, 116))), REF, 64)
LOOPED = verdict(2, out([3, 4] * 32), REF, 64)


def test_garbage_above_the_limit_fails_the_cell_and_is_never_best():
    cell = cell_of([CLEAN, LOOPED, LOOPED, CLEAN])
    part = cell["correctness"]
    assert part["checked"] == 4 and part["garbage_fraction"] == 0.5 and part["exact_match_fraction"] == 0.5
    assert part["garbage"]["repetition_loop"]["count"] == 2 and "2-gram" in part["garbage"]["repetition_loop"]["example"]
    assert part["output_share"] == pytest.approx(4 * 64 / (4 * 64 + 800))
    assert cell["status"] == CellStatus.FAILED and cell["error"].startswith(
        "GARBAGE OUTPUT: 2 of 4 verification outputs (50% > 0 --max-garbage-fraction): 2 repetition_loop")
    assert not_best(from_json(cell)) == cell["error"]
    assert verify_text(from_json(cell)) == "garb 2/4"
    # within a larger limit the cell stands, but its garbage still keeps it from being best
    lenient = cell_of([CLEAN, LOOPED, CLEAN, CLEAN], limit=0.5)
    assert lenient["status"] == CellStatus.OK and not_best(from_json(lenient)) is None
    assert not_best(from_json(cell_of([CLEAN, LOOPED, LOOPED, LOOPED], limit=0.5))).startswith("GARBAGE OUTPUT")


def test_divergence_is_a_note_and_fails_only_under_exact():
    cell = cell_of([CLEAN, DRIFTED, CLEAN])
    assert cell["status"] == CellStatus.OK and cell["correctness"]["first_divergence_tokens"] == {
        "min": 48, "p50": 48.0, "n": 1}
    assert "1 of 3 outputs differ from the reference (run_start) from token 48 (min), 48 (p50)" in cell["warnings"]
    assert verify_text(from_json(cell)) == "diff 1/3" and not_best(from_json(cell)) is None
    exact = cell_of([CLEAN, DRIFTED, CLEAN], mode=VerifyMode.EXACT)
    assert exact["status"] == CellStatus.FAILED and exact["error"].startswith("OUTPUT MISMATCH (--verify exact)")
    assert verify_text(from_json(cell_of([CLEAN, CLEAN], failed=1))) == "exact 2/2"
    assert cell_of([CLEAN, CLEAN], failed=1)["correctness"]["failed"] == 1


def test_a_cell_without_verify_has_no_part_and_no_column_text():
    cell = build_cell(CellKey(60, 8), measured())
    assert "correctness" not in cell.to_json() and verify_text(cell) == "-"


# ---- the three APIs' answers ------------------------------------------------------------------------------
def test_bodies_are_greedy_unary_and_ask_for_tokens():
    chat = verify_body(Api.OPENAI_CHAT, "p", "m", 64)
    assert chat["temperature"] == 0.0 and chat["max_tokens"] == 64 and chat["stream"] is False
    assert chat["logprobs"] is True and "ignore_eos" not in chat
    assert verify_body(Api.OPENAI_COMPLETIONS, "p", "m", 64)["logprobs"] == 1
    gen = verify_body(Api.SGLANG_GENERATE, "p", "m", 64)
    assert gen["sampling_params"] == {"max_new_tokens": 64, "temperature": 0.0, "ignore_eos": False}


@pytest.mark.parametrize("api,answer,tokens,unit,finish", [
    (Api.OPENAI_CHAT, {"choices": [{"message": {"content": " a b"}, "finish_reason": "stop",
                                    "logprobs": {"content": [{"token": " a"}, {"token": " b"}]}}],
                       "usage": {"completion_tokens": 2}}, [" a", " b"], TokenUnit.LOGPROBS, "stop"),
    (Api.OPENAI_CHAT, {"choices": [{"message": {"content": " a b"}, "finish_reason": "length",
                                    "logprobs": {"content": [{"id": 5, "token": " a"}, {"id": 6, "token": " b"}]}}],
                       "usage": {"completion_tokens": 2}}, [5, 6], TokenUnit.IDS, "length"),
    (Api.OPENAI_COMPLETIONS, {"choices": [{"text": " a b", "finish_reason": "length",
                                           "logprobs": {"tokens": [" a", " b"]}}], "usage": {"completion_tokens": 2}},
     [" a", " b"], TokenUnit.LOGPROBS, "length"),
    (Api.OPENAI_COMPLETIONS, {"choices": [{"text": " a b", "finish_reason": "length", "logprobs": None}],
                              "usage": {"completion_tokens": 2}}, None, TokenUnit.TEXT, "length"),
    (Api.SGLANG_GENERATE, {"text": " a b", "output_ids": [5, 6],
                           "meta_info": {"completion_tokens": 2, "finish_reason": {"type": "stop", "matched": 2}}},
     [5, 6], TokenUnit.IDS, "stop"),
    (Api.SGLANG_GENERATE, {"text": " a b", "meta_info": {"completion_tokens": 2, "finish_reason": None}},
     None, TokenUnit.TEXT, None),
])
def test_read_output(api, answer, tokens, unit, finish):
    got = read_output(api, orjson.dumps(answer))
    assert (got.text, got.tokens, got.unit, got.completion_tokens, got.finish_reason) == (" a b", tokens, unit, 2,
                                                                                        finish)


def test_an_answer_that_is_not_the_apis_is_an_error():
    for api, raw in ((Api.OPENAI_CHAT, b'{"error": "x"}'), (Api.SGLANG_GENERATE, b'{"text": "a"}'),
                     (Api.OPENAI_COMPLETIONS, b'[1]')):
        with pytest.raises(ValueError):
            read_output(api, raw)


# ---- the simulator's outputs ------------------------------------------------------------------------------
def test_simulator_outputs_are_deterministic_and_fault_where_told():
    clean = Output(7, [])
    clean.extend(64, running=32, faults=OutputFaults())
    assert clean.tokens == [clean_token(7, k) for k in range(64)] and repetition_loop(clean.tokens) is None
    looped = Output(7, [])
    for running in (8, 8, 17, 17):  # 16 tokens at 8 running, then above 16
        looped.extend(16, running, OutputFaults(garbage_above=16))
    assert looped.loop_from == 32 and looped.tokens[:32] == clean.tokens[:32]
    assert repetition_loop(looped.tokens) == (4, 32)
    drifted = Output(7, [])
    for running in (8, 8, 8, 8):
        drifted.extend(16, running, OutputFaults(drift_above=4, drift_after=40))
    assert drifted.drift_from == 40 and first_divergence(clean.tokens, drifted.tokens) == 40
    assert repetition_loop(drifted.tokens) is None


# ---- the live gauges --------------------------------------------------------------------------------------
def test_live_gauges_follow_each_verification_record():
    reg = CollectorRegistry()
    g = VerifyGauges(reg, ("run", "concurrency"))
    g.observe(("r", "8"), verify_record(0, CLEAN))
    g.observe(("r", "8"), verify_record(1, LOOPED))
    g.observe(("r", "8"), verify_record(2, None, ok=False))
    labels = {"run": "r", "concurrency": "8"}
    assert reg.get_sample_value("loadgen_verify_checked_requests", labels) == 2
    assert reg.get_sample_value("loadgen_verify_garbage_ratio", labels) == 0.5
    assert reg.get_sample_value("loadgen_verify_exact_match_ratio", labels) == 0.5


# ---- jobs, prompts, the reference, the sweep --------------------------------------------------------------
def test_verification_jobs_follow_the_warmup_lazily():
    base = JobList([{"i": 0}, {"i": 1}], 1_000_002, 2)
    jobs = Inserted(base, ["v0", "v1"], 2)
    assert len(jobs) == 1_000_004 and jobs[1].seq == 1 and jobs[2] == "v0" and jobs[3] == "v1" and jobs[4].seq == 2
    measure = jobs[2:]
    assert len(measure) == 1_000_002 and measure[0] == "v0" and measure[2].seq == 2


def test_prompts_and_reference_files(tmp_path):
    assert load_prompts(None) == list(BUILT_IN)
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "one"}\n\ntwo\n{"text": "three"}\n')
    assert load_prompts(str(f)) == ["one", "two", "three"]
    ref = Reference("run_start", ["one"], 64, [out(list(range(64)))], prompts_digest(["one"]))
    ref.save(str(tmp_path / "ref.json"))
    back = load_reference(str(tmp_path / "ref.json"))
    assert back.outputs == ref.outputs and back.source == f"file:{tmp_path / 'ref.json'}"
    check_matches(back, prompts_digest(["one"]), 64)
    with pytest.raises(UsageError, match="answers other prompts"):
        check_matches(back, prompts_digest(["two"]), 64)
    with pytest.raises(UsageError, match="give --verify-max-tokens 64"):
        check_matches(back, prompts_digest(["one"]), 32)


SWEEP = {"reconfigure": ["r", "{budget}"], "server": {"url": "http://h:1"},
         "matrix": {"contexts": [60], "concurrency": [1]},
         "configs": [{"name": "b8", "budget": 8}, {"name": "b0", "budget": 0}]}


def test_sweep_verify_reference_is_measured_first_and_must_exist(tmp_path):
    spec = parse_spec(SWEEP | {"verify": {"reference": "b0", "max_tokens": 32}}, str(tmp_path / "s.toml"),
                      out_dir=str(tmp_path))
    assert [c.name for c in spec.configs] == ["b0", "b8"]
    ref = str(tmp_path / "b0.verify-reference.json")
    b0, b8 = (spec.run_argv(c, "x.json") for c in spec.configs)
    assert b0[-2:] == ["--verify-save-reference", ref] and b8[-2:] == ["--verify-reference", ref]
    assert "--verify" in b8 and b8[b8.index("--verify-max-tokens") + 1] == "32"
    with pytest.raises(UsageError, match=r"reference = 'b9' is no configuration of this sweep; choose one of b8, b0"):
        parse_spec(SWEEP | {"verify": {"reference": "b9"}}, str(tmp_path / "s.toml"))
    exact = parse_spec(SWEEP | {"verify": {"mode": "exact"}}, str(tmp_path / "s.toml"))
    assert exact.run_argv(exact.configs[0], "x.json")[-2:] == ["--verify", "exact"]
    with pytest.raises(UsageError, match="mode = .fast.; choose one of garbage, exact"):
        parse_spec(SWEEP | {"verify": {"mode": "fast"}}, str(tmp_path / "s.toml"))


BAD = [
    (["--verify-prompts", "p.txt"], "--verify-prompts needs --verify (add --verify, or --verify exact)"),
    (["--verify", "--verify-prompts", "EMPTY"], "--verify-prompts EMPTY: holds no prompt; give one prompt per line "
                                                "(text, or JSONL with a 'prompt' or 'text' field)"),
    (["--verify", "--verify-prompts", "MISSING"], "--verify-prompts MISSING: no such file; give a text or JSONL "
                                                  "file of prompts"),
    (["--verify", "--verify-reference", "EMPTY"], "--verify-reference EMPTY: cannot be read"),
    (["--verify", "--max-garbage-fraction", "2"], "--max-garbage-fraction 2: give a fraction from 0 to 1"),
    (["--verify", "--workers", "2"], "--verify runs in one process: leave out --workers and --shard"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_with_one_line_before_any_load(args, message, tmp_path, cli):
    (tmp_path / "empty").write_text("\n\n")
    args = [str(tmp_path / "empty") if a == "EMPTY" else str(tmp_path / "missing") if a == "MISSING" else a
            for a in args]
    message = message.replace("EMPTY", str(tmp_path / "empty")).replace("MISSING", str(tmp_path / "missing"))
    proc = cli("--url", "http://127.0.0.1:9", "--out", str(tmp_path / "r.json"), "--wait-ready", "0", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"loadgen: error: {message}"), lines
    assert not (tmp_path / "r.requests.jsonl").exists()


# ---- where the verdicts show: compare's best, the report, the live exporter -------------------------------
def test_garbage_is_never_best_in_compare_and_shows_in_the_report():
    from loadgen.report import compare
    from loadgen.report.html_tables import matrix_table_html

    garbage = cell_of([CLEAN, LOOPED, CLEAN, CLEAN])
    garbage["output_tok_s"] = 10 * (cell_of([CLEAN])["output_tok_s"] or 1)
    clean = cell_of([CLEAN, CLEAN, CLEAN, CLEAN])
    runs = [compare.Run("fast", "a.json", {}, {(60, 8, None): from_json(garbage)}),
            compare.Run("right", "b.json", {}, {(60, 8, None): from_json(clean)})]
    rows = {r["config"]: r for r in compare.comparison(runs)}
    assert rows["fast"]["status"] == "failed" and rows["fast"]["error"].startswith("GARBAGE OUTPUT: 1 of 4")
    assert "tok_s" not in " ".join(rows["fast"]["best"])
    html = matrix_table_html(runs[0])
    assert ">verify<" in html and "garb 1/4" in html
    assert ">verify<" not in matrix_table_html(compare.Run("plain", "c.json", {}, {
        (60, 8, None): build_cell(CellKey(60, 8), measured())}))


def test_live_exporter_keeps_verification_requests_out_of_its_latency_histograms():
    from exporters.live import LiveExporter

    reg = CollectorRegistry()
    exp = LiveExporter("r", registry=reg)
    exp.cell_started(CellKey(60, 8), "r")
    exp.request_sent(CellKey(60, 8))
    exp.record(verify_record(0, LOOPED))
    labels = {"run": "r", "concurrency": "8", "context_tokens": "60", "request_rate": ""}
    assert reg.get_sample_value("loadgen_verify_garbage_ratio", labels) == 1.0
    assert reg.get_sample_value("loadgen_requests_total", labels | {"outcome": "ok"}) == 1
    assert reg.get_sample_value("loadgen_e2e_latency_seconds_count", labels) == 0
    assert reg.get_sample_value("loadgen_in_flight_requests", {"run": "r"}) == 0
