"""--verify against tests/reference_server.py, a server that is not loadgen's simulator (issue 35's done-when case):
one whose clean outputs hold U+FFFD for ~40 % of prompts at every batch size and which loops on one word above 16
running requests, and one that is not deterministic alone. Judged against its reference, the first passes c=1 and
c=8 and fails c=32 on garbage, saying once that the reference held replacement characters; the second's
divergence is said beside its noise floor. A saved reference carries both (an older file, one answer per prompt:
the floor is unknown). The two servers start together."""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from tests import side_by_side
from tests.conftest import run_loadgen
from tests.reference_server import start, stop

pytestmark = pytest.mark.sim

SERVERS = {"fffd-loop": ("--fffd-fraction", "0.4", "--loop-above", "16"),
           "nondeterministic": ("--nondeterministic-fraction", "1.0")}


def run(url: str, tmp_path, concurrency: str, *args: str, name: str = "r"):
    out = tmp_path / f"{name}.json"
    proc = run_loadgen("--url", url, "--contexts", "60", "--concurrency", concurrency, "--max-tokens", "32",
                       "--requests-per-cell", "32", "--verify", "--out", str(out), *args, timeout=180)
    assert out.exists(), proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    return proc, doc, {c["concurrency"]: c for c in doc["cells"] if c.get("correctness")}


def saved_reference_runs(url: str, tmp_path) -> dict:
    """A reference saved at c=1, c=32 judged against the file, then c=1 against the same file with its second
    answers taken out (a file saved before references were answered twice). Stops after a failed save."""
    ref = tmp_path / "ref.json"
    runs: dict = {"ref": ref, "saved": run(url, tmp_path, "1", "--verify-save-reference", str(ref), name="a")}
    if runs["saved"][0].returncode != 0:
        return runs
    older = json.loads(ref.read_text())
    runs["answers_again"] = len(older["outputs_again"])
    runs["judged"] = run(url, tmp_path, "32", "--verify-reference", str(ref), name="b")
    del older["outputs_again"]
    ref.write_text(json.dumps(older))
    runs["older"] = run(url, tmp_path, "1", "--verify-reference", str(ref), name="c")
    return runs


@side_by_side.background("verify-reference-server")
def build_runs(tmp, cleanups) -> dict:
    """The two servers, started together, and the file's runs: those against the fffd-loop server one after the
    other (its loop depends on the batch), beside the one against the other server. Content checks only (no
    figure here is timed), so they are built beside the other waiting stacks (tests/side_by_side.py)."""
    with concurrent.futures.ThreadPoolExecutor(len(SERVERS)) as pool:
        started = dict(zip(SERVERS, pool.map(lambda flags: start(tmp, "--step-ms", "2", *flags), SERVERS.values())))
    for _, proc in started.values():
        cleanups.callback(stop, proc)
    url = {name: url for name, (url, _) in started.items()}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        fffd = pool.submit(lambda: (run(url["fffd-loop"], tmp, "1,8,32", name="garbage"),
                                    saved_reference_runs(url["fffd-loop"], tmp)))
        divergence = pool.submit(run, url["nondeterministic"], tmp, "1,8", name="divergence")
        garbage, saved = fffd.result()
        return {"garbage": garbage, "saved": saved, "divergence": divergence.result()}


@pytest.fixture(scope="module")
def runs():
    try:
        yield side_by_side.result("verify-reference-server")
    finally:
        side_by_side.finish("verify-reference-server")


def said(proc) -> str:
    """stderr with its lines' wrapping undone (loadgen wraps a long line at 120 columns)."""
    return " ".join(proc.stderr.split())


def test_garbage_against_a_reference_that_holds_replacement_characters(runs):
    proc, doc, cells = runs["garbage"]
    assert proc.returncode == 1, proc.stderr[-3000:]
    held = doc["verify"]["reference_garbage"]["replacement_characters"]
    assert 1 <= len(held) <= 6 and set(doc["verify"]["reference_garbage"]) == {"replacement_characters"}
    assert (f"verify: {len(held)} of 8 reference outputs hold replacement characters (prompt "
            f"{', '.join(map(str, held))}): for those prompts that check is off;") in said(proc)
    assert proc.stderr.count("reference outputs hold replacement characters") == 1  # said once, before the cells
    for c in (1, 8):
        part = cells[c]["correctness"]
        assert cells[c]["status"] == "ok", cells[c]["error"]
        assert part["garbage_fraction"] == 0.0 and part["exact_match_fraction"] == 1.0
        assert part["absolute_garbage_fraction"] == len(held) / 8  # kept: judged alone they hold U+FFFD
    part = cells[32]["correctness"]
    assert part["garbage_fraction"] >= 0.9 and set(part["garbage"]) == {"repetition_loop"}
    assert cells[32]["status"] == "failed" and cells[32]["error"].startswith("GARBAGE OUTPUT")
    assert doc["verify"]["unstable"] == [] and part["reference_unstable"] == 0
    assert "exact 8/8" in proc.stdout and "garb " in proc.stdout


def test_divergence_of_a_server_not_deterministic_alone_is_said_beside_its_floor(runs):
    proc, doc, cells = runs["divergence"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("verify: the server is not deterministic alone for 8 of 8 prompts (prompt 0, 1, 2, 3, 4, 5, 6, 7; its "
            "two answers part from token 12 min") in said(proc)
    assert doc["verify"]["unstable"] == list(range(8)) and doc["verify"]["answers"] == 2
    for cell in cells.values():
        part = cell["correctness"]
        assert part["reference_unstable"] == 8 and part["diverged_where_stable"] == 0
        assert part["diverged"] == 8 and part["first_divergence_tokens"]["min"] == 12
        assert any("noise floor: alone the server answered all 8 prompts two ways" in w for w in cell["warnings"])
        assert cell["status"] == "ok"


def test_a_saved_reference_keeps_its_garbage_and_floor_an_older_one_says_the_floor_is_unknown(runs):
    saved_runs = runs["saved"]
    ref, (saved, first, _) = saved_runs["ref"], saved_runs["saved"]
    assert saved.returncode == 0, saved.stderr[-3000:]
    assert saved_runs["answers_again"] == 8
    proc, doc, cells = saved_runs["judged"]
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert doc["verify"]["reference"] == f"file:{ref}" and doc["verify"]["unstable"] == []
    assert doc["verify"]["reference_garbage"] == first["verify"]["reference_garbage"]
    assert "reference outputs hold replacement characters" in said(proc) and "answered one at a time" not in said(proc)
    assert cells[32]["correctness"]["garbage_fraction"] >= 0.9
    # against the same file without its second answers (a reference saved before it was answered twice)
    proc, doc, cells = saved_runs["older"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "holds one answer per prompt: the server's noise floor alone is unknown" in said(proc)
    assert doc["verify"]["answers"] == 1 and doc["verify"]["unstable"] is None
    assert cells[1]["correctness"]["reference_unstable"] is None and cells[1]["correctness"]["garbage_fraction"] == 0
