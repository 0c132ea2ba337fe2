"""`loadgen search` against tests/reference_server.py (not loadgen's simulator), 4 slots, so the answer is 4:
a server that stalls once for 8 s inside a probe gives the same answer as the same server without the stall, in
at most 12 cells, the stalled probe measured again (both measurements in the results and on the console); a
server that gets 8× slower for good after its 40th request gives no answer, says it drifted and exits 1."""

from __future__ import annotations

import concurrent.futures

import pytest

from loadgen.files import read_json, read_jsonl
from tests.conftest import run_loadgen
from tests.reference_server import running

pytestmark = pytest.mark.sim

SERVER = ("--slots", "4", "--step-ms", "10")  # a 16-token request lasts 160 ms; a 5th stream waits for a slot
SEARCH = ("--contexts", "60", "--max-tokens", "16", "--slo", "ttft=30ms,tpot=25ms", "--start", "4", "--growth", "2",
          "--probe-min-seconds", "1")


def search(url: str, out, *extra: str):
    return run_loadgen("search", "--url", url, *SEARCH, *extra, "--out", str(out), timeout=240)


def search_slow(url: str, out):
    # 64 slots and loose targets: the walk goes up (short cells) while the control probe, c=4, is measured
    # again after every probe (--drift-every 1); the slowdown starts inside the first probe, after request 40
    return run_loadgen("search", "--url", url, "--contexts", "60", "--max-tokens", "12", "--slo", "ttft=1s,tpot=200ms",
                       "--start", "4", "--growth", "4", "--probe-min-seconds", "1", "--drift-every", "1",
                       "--out", str(out), timeout=240)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """The file's searches, each against a server of its own: the clean one beside the one that drifts (light after
    its first 40 requests: every step 8× as long), then the paused one alone and the same command again after it.
    Where the pause falls depends on when the probe at c=8 stops early, which moves with the machine's load: nothing
    runs beside that search."""
    tmp = tmp_path_factory.mktemp("search-reference")
    events = tmp / "events.jsonl"

    def clean():
        with running(tmp, *SERVER) as url:
            return search(url, tmp / "clean.json")

    def slow():
        with running(tmp, "--step-ms", "10", "--slow-after", "40", "--slow-factor", "8") as url:
            return search_slow(url, tmp / "slow.json")

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, drifted = pool.submit(clean), pool.submit(slow)
        runs = {"clean": first.result(), "slow": drifted.result()}
    with running(tmp, *SERVER, "--pause-once-after", "60", "--pause-s", "8", "--events", str(events)) as url:
        paused = search(url, tmp / "paused.json")
        runs["paused"] = (paused, search(url, tmp / "paused.json"))  # the same command again: every cell kept
    return tmp, runs


def test_a_stall_inside_a_probe_gives_the_same_answer_and_the_stalled_probe_is_measured_again(searched):
    tmp_path, runs = searched
    clean, (paused, resumed) = runs["clean"], runs["paused"]
    events = tmp_path / "events.jsonl"
    assert clean.returncode == 0, clean.stderr
    assert paused.returncode == 0, paused.stderr
    first = read_json(str(tmp_path / "clean.json"))["search"]["answers"]["60"]
    doc = read_json(str(tmp_path / "paused.json"))
    answer = doc["search"]["answers"]["60"]
    assert (answer["met"], answer["missed"]) == (first["met"], first["missed"]) == (4, 5), (first, answer)
    assert len(doc["cells"]) == len(answer["probes"]) <= 12 and answer["complete"]
    pause = next(e for e in read_jsonl(str(events)) if e["event"] == "pause")
    stalled = next(c for c in doc["cells"] if c["window_ns"]["start_ns"] <= pause["t_ns"] <= c["window_ns"]["end_ns"])
    # 4 sizing requests, then c=4's 40: the stall falls inside the probe at c=8, whose throughput fell by more
    # than half while the load grew; it is measured again, both are kept and shown, and the knee leaves it out
    assert (stalled["concurrency"], stalled.get("again")) == (8, None), stalled
    again = [a for a in answer["again"] if a["load"] == 8]
    assert again and again[0]["disagreed"] and again[0]["again"]["output_tok_s"] > 2 * again[0]["first"]["output_tok_s"]
    assert [c.get("again") for c in doc["cells"] if c["concurrency"] == 8] == [None, 1]
    assert "  again  c=8 " in paused.stdout and "disagreed, the second counts" in paused.stdout
    assert "c=8 left out: measured twice" in " ".join(paused.stdout.split())  # the note may wrap at 120 columns
    ours = [line for line in paused.stderr.splitlines() if line.startswith("search")]
    assert all(len(line) <= 120 for line in paused.stdout.splitlines() + ours)
    assert resumed.returncode == 0 and "resuming the search" in resumed.stderr, resumed.stderr
    assert "search: ctx=60 c=" not in resumed.stderr  # no cell measured
    assert read_json(str(tmp_path / "paused.json"))["search"]["answers"]["60"] == answer


def test_a_server_that_gets_8x_slower_for_good_gives_no_answer_and_says_it_drifted(searched):
    tmp_path, runs = searched
    r, out = runs["slow"], tmp_path / "slow.json"
    assert r.returncode == 1, r.stderr
    assert "no answer: the server drifted during the search" in r.stdout and "× slower during the run" in r.stdout
    doc = read_json(str(out))
    answer = doc["search"]["answers"]["60"]
    assert answer["met"] is None and not answer["complete"] and answer["drift"]["drifted"]
    assert answer["drift"]["factor"] > 2 and answer["control_checks"] == 2  # a drift is confirmed once
    drifted = [c for c in doc["cells"] if any(i["kind"] == "drifted" for i in c["incidents"])]
    assert len(drifted) == 1 and drifted[0]["status"] == "failed" and drifted[0]["concurrency"] == 4
