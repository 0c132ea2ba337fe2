"""--verify judged against its reference: an output is garbage for a reason only where its reference output is not
garbage for that reason (both counts kept, the relative one judges the cell), and the server's own noise floor
(the reference answered twice alone: the prompts whose two answers differ) said beside each cell's divergence."""

from __future__ import annotations

import json

import pytest

from loadgen.client.verify_request import VerifyOutput
from loadgen.config import VerifyConfig
from loadgen.metrics.correctness import absolute_garbage, checks_off, garbage_all, noise_floor, verdict
from loadgen.names import CellStatus, GarbageReason, Outcome, Phase, TokenUnit
from loadgen.record import CellKey, Record
from loadgen.results.build_cell import build_cell
from loadgen.results.cell_result import from_json
from loadgen.results.correctness import Verification, verify_text
from loadgen.verify.reference import Reference, load_reference, reference_lines, reference_summary

pytestmark = pytest.mark.unit

FFFD = "\ufffd"
R = GarbageReason


def out(tokens: list[int], fffd: bool = False, finish: str = "length") -> VerifyOutput:
    text = "".join(f" w{t}" for t in tokens)
    return VerifyOutput((FFFD if fffd else "") + text, tokens, TokenUnit.IDS, len(tokens), finish)


CLEAN = out(list(range(64)))
HOLDS_FFFD = out(list(range(64)), fffd=True)
LOOPS = out(list(range(8)) + [7] * 56)
LOOPS_FFFD = out(list(range(8)) + [7] * 56, fffd=True)


def test_every_reason_is_judged_on_its_own():
    assert set(garbage_all(LOOPS_FFFD, 64)) == {R.REPLACEMENT_CHARACTERS, R.REPETITION_LOOP}
    assert list(garbage_all(LOOPS_FFFD, 64))[0] == R.REPLACEMENT_CHARACTERS  # the order of the docs' table
    assert garbage_all(CLEAN, 64) == {}
    short = VerifyOutput("", [], TokenUnit.IDS, 0, "length")
    assert set(garbage_all(short, 64)) == {R.EMPTY, R.CUT_SHORT}
    assert checks_off(64, HOLDS_FFFD, LOOPS) == {R.REPLACEMENT_CHARACTERS, R.REPETITION_LOOP}
    assert checks_off(64, CLEAN, None) == frozenset()


@pytest.mark.parametrize("output,reference,judged,alone", [
    (HOLDS_FFFD, HOLDS_FFFD, None, [R.REPLACEMENT_CHARACTERS]),       # the reference holds U+FFFD as well
    (HOLDS_FFFD, CLEAN, R.REPLACEMENT_CHARACTERS, [R.REPLACEMENT_CHARACTERS]),
    (LOOPS_FFFD, HOLDS_FFFD, R.REPETITION_LOOP, [R.REPLACEMENT_CHARACTERS, R.REPETITION_LOOP]),  # a new reason
    (LOOPS, LOOPS, None, [R.REPETITION_LOOP]),                        # the model loops alone too
    (CLEAN, LOOPS, None, []),
    (HOLDS_FFFD, None, R.REPLACEMENT_CHARACTERS, [R.REPLACEMENT_CHARACTERS]),  # no reference: judged alone
])
def test_an_output_is_garbage_only_for_what_its_reference_is_not(output, reference, judged, alone):
    v = verdict(0, output, reference, 64)
    assert v["garbage"] == judged and list(v["alone"]) == alone
    assert (v["example"] is None) == (judged is None)


def test_either_reference_answer_turns_a_check_off():
    v = verdict(0, HOLDS_FFFD, CLEAN, 64, again=out(list(range(12)) + list(range(100, 152)), fffd=True))
    assert v["garbage"] is None and v["stable"] is False and v["exact"] is True


def verify_record(seq: int, v: dict) -> Record:
    return Record(run_id="r", cell=CellKey(60, 32), seq=seq, phase=Phase.VERIFY, t_sent_ns=1, t_end_ns=2,
                  outcome=Outcome.OK, completion_tokens=64, verify=v)


def verification(recs: list[Record], cfg: VerifyConfig) -> Verification:
    """The cell's verification as the run's verifier hands it to the builder (against the run-start reference)."""
    return Verification(recs, cfg.mode, "run_start", cfg.max_tokens, cfg.max_garbage_fraction)


def measured(n: int = 8) -> list[Record]:
    return [Record(run_id="r", cell=CellKey(60, 32), seq=100 + i, t_sent_ns=1_000, t_first_token_ns=2_000,
                   t_last_token_ns=9_000, t_end_ns=10_000, completion_tokens=100, prompt_tokens=60, chunks=10,
                   chunk_tokens=[10] * 10, chunk_gaps_ns=[700] * 9) for i in range(n)]


def cell_of(verdicts: list[dict]) -> dict:
    cfg = VerifyConfig(mode="garbage", max_tokens=64, max_garbage_fraction=0.0)
    recs = [verify_record(i, v) for i, v in enumerate(verdicts)]
    return build_cell(CellKey(60, 32), measured(), verification=verification(recs, cfg)).to_json()


def test_the_relative_count_judges_the_cell_and_the_absolute_one_is_kept():
    # 3 of 8 prompts hold U+FFFD in their reference and in the cell: the cell is clean against its reference
    refs = [HOLDS_FFFD] * 3 + [CLEAN] * 5
    clean = cell_of([verdict(i, ref, ref, 64) for i, ref in enumerate(refs)])
    part = clean["correctness"]
    assert part["garbage_fraction"] == 0.0 and part["absolute_garbage_fraction"] == 3 / 8
    assert part["absolute_garbage"] == {"replacement_characters": {"count": 3, "example": HOLDS_FFFD.text[:20]}}
    assert clean["status"] == CellStatus.OK and part["exact_match_fraction"] == 1.0
    assert verify_text(from_json(clean)) == "exact 8/8"
    # the same server looping above a batch size: every output is garbage against its reference
    looped = cell_of([verdict(i, LOOPS_FFFD if ref is HOLDS_FFFD else LOOPS, ref, 64) for i, ref in enumerate(refs)])
    part = looped["correctness"]
    assert part["garbage_fraction"] == 1.0 and part["garbage"]["repetition_loop"]["count"] == 8
    assert part["absolute_garbage"]["replacement_characters"]["count"] == 3
    assert part["absolute_garbage"]["repetition_loop"]["count"] == 5
    assert looped["status"] == CellStatus.FAILED and looped["error"].startswith(
        "GARBAGE OUTPUT: 8 of 8 verification outputs (100% > 0 --max-garbage-fraction): 8 repetition_loop")
    # a cell with more garbage alone than against the reference says both
    mixed = cell_of([verdict(0, LOOPS, CLEAN, 64), verdict(1, HOLDS_FFFD, HOLDS_FFFD, 64)])
    assert "verification outputs (50% > 0 --max-garbage-fraction) against the reference (2 alone)" in mixed["error"]


def test_older_verdicts_count_their_garbage_as_judged_alone():
    old = [{"prompt": 0, "garbage": "repetition_loop", "example": "…", "exact": False},
           {"prompt": 1, "garbage": None}]
    assert absolute_garbage(old) == (0.5, {"repetition_loop": {"count": 1, "example": "…"}})
    assert noise_floor(old) == (None, None)


DRIFTED = out(list(range(12)) + list(range(100, 152)))


def test_divergence_is_said_beside_the_noise_floor():
    # prompts 0-1: the server answered them two ways alone; 2-3: the same twice
    verdicts = [verdict(0, DRIFTED, CLEAN, 64, again=DRIFTED), verdict(1, CLEAN, CLEAN, 64, again=DRIFTED),
                verdict(2, DRIFTED, CLEAN, 64, again=CLEAN), verdict(3, CLEAN, CLEAN, 64, again=CLEAN)]
    assert [v["stable"] for v in verdicts] == [False, False, True, True]
    assert noise_floor(verdicts) == (2, 1)
    cell = cell_of(verdicts)
    part = cell["correctness"]
    assert part["reference_unstable"] == 2 and part["diverged_where_stable"] == 1 and part["diverged"] == 2
    assert ("2 of 4 outputs differ from the reference (run_start) from token 12 (min), 12 (p50); noise floor: "
            "alone the server answered 2 of 4 prompts two ways, 1 of the 2 others differ here") in cell["warnings"]
    once = cell_of([verdict(0, DRIFTED, CLEAN, 64)])
    assert once["correctness"]["reference_unstable"] is None and "noise floor" not in " ".join(once["warnings"])


def reference(outputs: list[VerifyOutput], again: list[VerifyOutput] | None) -> Reference:
    return Reference("run_start", [f"p{i}" for i in range(len(outputs))], 64, outputs, "d", "m", "openai-chat", again)


def test_the_reference_says_its_own_garbage_and_its_floor_once():
    first = [HOLDS_FFFD, CLEAN, HOLDS_FFFD, CLEAN, CLEAN, HOLDS_FFFD, CLEAN, CLEAN]
    summary = reference_summary(reference(first, [DRIFTED] * 8))
    assert summary["reference_garbage"] == {"replacement_characters": [0, 2, 5]}
    assert summary["answers"] == 2 and summary["unstable"] == list(range(8))
    assert summary["unstable_divergence_tokens"] == {"min": 12, "p50": 12.0, "n": 8}
    lines = reference_lines(summary)
    assert lines[0] == ("3 of 8 reference outputs hold replacement characters (prompt 0, 2, 5): for those "
                        "prompts that check is off; divergence still counts")
    assert lines[1].startswith("the server is not deterministic alone for 8 of 8 prompts (prompt 0, 1, 2")
    assert lines[1].endswith("divergence under load is not evidence against it")
    stable = reference_lines(reference_summary(reference([CLEAN] * 2, [CLEAN] * 2)))
    assert stable == ["the server answered each of the 2 prompts the same twice alone: any divergence under load "
                      "comes from the load"]
    once = reference_lines(reference_summary(reference([CLEAN, LOOPS], None)))
    assert once[0].startswith("1 of 2 reference outputs end in a repetition loop")
    assert "noise floor alone is unknown" in once[1]


def test_a_saved_reference_keeps_both_answers_and_an_older_file_has_one(tmp_path):
    path = tmp_path / "ref.json"
    reference([CLEAN, HOLDS_FFFD], [CLEAN, DRIFTED]).save(str(path))
    back = load_reference(str(path))
    assert back.again == [CLEAN, DRIFTED] and back.again_of(1) == DRIFTED
    assert reference_summary(back)["unstable"] == [1] and reference_summary(back)["reference"] == f"file:{path}"
    doc = json.loads(path.read_text())
    del doc["outputs_again"]  # a file saved before the reference was answered twice
    path.write_text(json.dumps(doc))
    older = load_reference(str(path))
    assert older.again is None and older.again_of(0) is None and reference_summary(older)["unstable"] is None
