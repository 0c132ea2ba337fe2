"""The drift check of a plain run against tests/reference_server.py (not loadgen's simulator): a server that
gets 8× slower for good after its 25th request is said to have drifted (console, results, exit 1); the same
server without the slowdown is not."""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from tests.conftest import run_loadgen
from tests.reference_server import running
from tests.schema_check import assert_documented

pytestmark = pytest.mark.sim

# the sizing probe, then 16 requests at c=4 (the control) and 16 at c=8: the 26th falls in the second cell,
# so the control is fast the first time and measured again wholly on the slow server (4 waves of 2.6 s: 24
# requests made it 6)
MATRIX = ("--contexts", "256", "--concurrency", "4,8", "--requests-per-cell", "16", "--max-tokens", "32")
SLOW_AFTER = "25"
SERVER = ("--step-ms", "10")


def _run(tmp_path, name: str, *server: str, drift_check: str = "auto"):
    out = tmp_path / f"{name}.json"
    with running(tmp_path, *server) as url:
        proc = run_loadgen("--url", url, *MATRIX, "--out", str(out), "--drift-check", drift_check, timeout=240)
    return proc, json.loads(out.read_text()), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The file's three runs, each against a server of its own: the one that drifts beside the one with the check
    off (the same matrix in step: the off one is done before the other's control cell), then the clean one
    alone, so that no run's control cell is measured beside another run's load."""
    tmp = tmp_path_factory.mktemp("drift-run")
    slow = (*SERVER, "--slow-after", SLOW_AFTER, "--slow-factor", "8")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        drifted = pool.submit(_run, tmp, "out", *slow)
        off = pool.submit(_run, tmp, "off", *slow, drift_check="off")
        done = {"drifted": drifted.result(), "off": off.result()}
    return {**done, "clean": _run(tmp, "clean", *SERVER)}


def test_a_server_8x_slower_after_its_25th_request_drifted(runs):
    proc, doc, out = runs["drifted"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    drift = doc["drift"]
    assert drift["drifted"] and "output_tok_s" in drift["moved"]
    assert 6 < drift["factor"] < 10  # every step 8× as long; the prefill share and the client's own time aside
    assert drift["cell"] == {"context_tokens": 256, "concurrency": 4}
    assert drift["again"]["run_id"] == drift["first"]["run_id"] + "-control"
    said = f"the server got {drift['factor']:.1f}× slower during the run: ctx 256 c=4 "
    assert drift["sentence"].startswith(said)
    assert "DRIFT: " + drift["sentence"] in proc.stderr
    control = doc["cells"][0]
    assert control["status"] == "failed" and control["error"] == drift["sentence"]  # a failed check: figures stand
    assert [i["kind"] for i in control["incidents"]] == ["drifted"]
    assert_documented(doc)
    assert len(doc["cells"]) == 2  # the control measured again is not a cell of the matrix
    assert drift["sentence"] in proc.stdout  # the note below the table
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if "drift" in line.lower() or "control" in line]
    assert len(ours) >= 3 and all(len(line) <= 120 for line in ours)
    records = [json.loads(line) for line in out.with_suffix(".requests.jsonl").read_text().splitlines()]
    again = [r for r in records if r["run_id"] == drift["again"]["run_id"]]
    assert len(again) == 16 and {tuple(r["cell"].values()) for r in again} == {(256, 4)}


def test_a_clean_server_says_nothing_of_drift(runs):
    proc, doc, _ = runs["clean"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc["drift"]["drifted"] is False and doc["drift"]["moved"] == []
    assert 0.5 < doc["drift"]["factor"] < 2  # a cold first cell on a busy host reads up to 1.6× either way
    assert "DRIFT" not in proc.stderr and "slower" not in proc.stdout + proc.stderr
    assert all(c["status"] == "ok" for c in doc["cells"])


def test_drift_check_off_measures_nothing_again(runs):
    proc, doc, _ = runs["off"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "drift" not in doc and "drift check" not in proc.stderr
