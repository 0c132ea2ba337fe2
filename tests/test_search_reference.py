"""`loadgen search` against tests/reference_server.py (not loadgen's simulator), 4 slots, so the answer is 4:
a server that stalls once for 8 s inside a probe gives the same answer as the same server without the stall, in
at most 12 cells, the stalled probe measured again (both measurements in the results and on the console); a
server that gets 8× slower for good after its 40th request gives no answer, says it drifted and exits 1, and so
does one 7× slower from inside the search's first probe on, with the defaults (its first load measured again
on the slow server: the drift is judged against the first measurement). With the defaults (from 1, ×4, 10 %)
against 64 slots, a clean search and one with an 8 s stall take at most 12 cells each (14 and 16 before) and
answer within the resolution of each other."""

from __future__ import annotations

import concurrent.futures

import pytest

from loadgen.files import read_json, read_jsonl
from loadgen.search.probes import SearchConfig
from tests import side_by_side
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


def search_slowed_in_first_probe(url: str, out):
    # the defaults (from c=1, ×4, the control measured again at the end only); c=1's first 40 requests take
    # ~1.3 s, short of the 2 s minimum, so c=1 is extended once the walk rests on it, and then measured again
    # as the missed end: both on the slow server, as every cell after the first
    return run_loadgen("search", "--url", url, "--contexts", "60", "--max-tokens", "6", "--slo", "ttft=30ms,tpot=20ms",
                       "--probe-min-seconds", "2", "--out", str(out), timeout=240)


@side_by_side.background("search-reference-drifts")
def build_drifts(tmp, cleanups):
    """The two searches on servers that drift, side by side, beside the unit tier (tests/side_by_side.py): one
    whose every step is 8× as long after its first 40 requests, one slowed 7× inside its first probe. Drifts of
    7 and 8 times stand out of any load the machine adds; what they check is that the search says so.
    ({name: the run}, their folder)"""
    def slow():
        with running(tmp, "--step-ms", "10", "--slow-after", "40", "--slow-factor", "8") as url:
            return search_slow(url, tmp / "slow.json")

    def slowed_in_first_probe():
        # 4 requests before the first probe (readiness, sizing): from the 42nd on, c=1's last 3 of 40, 7× slower
        with running(tmp, "--slots", "4", "--step-ms", "5", "--slow-after", "42", "--slow-factor", "7") as url:
            return search_slowed_in_first_probe(url, tmp / "slowed-first.json")

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        drifted, first_probe = pool.submit(slow), pool.submit(slowed_in_first_probe)
        return {"slow": drifted.result(), "slowed-first": first_probe.result()}, tmp


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """The file's searches, each against a server of its own: the two that drift built beside the unit tier
    (`build_drifts`); then the clean one, the paused one and the same command again after it; then the issue's
    clean and stalled searches, each alone. Whether the clean and the paused one answer 4 hangs on TTFTs of ~10
    ms against a 30 ms target, where a pause falls depends on when a probe stops early, and how many cells the
    issue's searches take on when one is extended, all of which move with the machine's load: nothing runs beside
    those."""
    tmp = tmp_path_factory.mktemp("search-reference")
    events = tmp / "events.jsonl"
    try:
        drifts, drifted_in = side_by_side.result("search-reference-drifts")
    finally:
        side_by_side.finish("search-reference-drifts")
    runs = dict(drifts)
    with running(tmp, *SERVER) as url:
        runs["clean"] = search(url, tmp / "clean.json")
    with running(tmp, *SERVER, "--pause-once-after", "60", "--pause-s", "8", "--events", str(events)) as url:
        paused = search(url, tmp / "paused.json")
        runs["paused"] = (paused, search(url, tmp / "paused.json"))  # the same command again: every cell kept
    runs["issue-clean"] = issue_search(tmp, "clean")
    runs["issue-stalled"] = issue_search(tmp, "stalled", "--pause-once-after", "120", "--pause-s", "8")
    return tmp, runs, drifted_in


def test_a_stall_inside_a_probe_gives_the_same_answer_and_the_stalled_probe_is_measured_again(searched):
    tmp_path, runs, _ = searched
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
    _, runs, tmp_path = searched
    r, out = runs["slow"], tmp_path / "slow.json"
    assert r.returncode == 1, r.stderr
    assert "no answer: the server drifted during the search" in r.stdout and "× slower during the run" in r.stdout
    doc = read_json(str(out))
    answer = doc["search"]["answers"]["60"]
    assert answer["met"] is None and not answer["complete"] and answer["drift"]["drifted"]
    assert answer["drift"]["factor"] > 2 and answer["control_checks"] == 2  # a drift is confirmed once
    drifted = [c for c in doc["cells"] if any(i["kind"] == "drifted" for i in c["incidents"])]
    assert len(drifted) == 1 and drifted[0]["status"] == "failed" and drifted[0]["concurrency"] == 4


def test_a_server_slowed_inside_the_first_probe_gives_no_answer_and_says_it_drifted(searched):
    _, runs, tmp_path = searched
    r = runs["slowed-first"]
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no answer: the server drifted during the search" in r.stdout and "× slower during the run" in r.stdout
    answer = read_json(str(tmp_path / "slowed-first.json"))["search"]["answers"]["60"]
    assert answer["met"] is None and not answer["complete"] and answer["drift"]["drifted"]
    # c=1 was measured again as a probe on the slow server; the control is judged against c=1's first cell
    assert any(a["load"] == 1 for a in answer["again"]), answer["again"]
    assert answer["drift"]["cell"] == {"context_tokens": 60, "concurrency": 1} and answer["drift"]["factor"] > 2


# the issue's search: the defaults (from c=1, ×4 a probe, 10 %) against the 4-slot server; probes of 3 s rather than
# 10 s keep it short. A 5th stream waits a slot's 160 ms, so c=5 meets ttft 30 ms for about a third of its requests:
# every load the walk probes (1, 4, 16, 8, 6, 5) is met or missed far from the 90 % line
ISSUE_SEARCH = ("--contexts", "60", "--max-tokens", "16", "--slo", "ttft=30ms,tpot=25ms", "--probe-min-seconds", "3")


def issue_search(tmp, name: str, *faults: str):
    """The issue's search against the 4-slot server with `faults` (the stalled one: the server stopped for 8 s
    once after its 120th request: 4 before the first probe, c=1's 40, c=4's ~45, inside c=16's ~150)."""
    with running(tmp, *SERVER, *faults) as url:
        out = tmp / f"issue-{name}.json"
        r = run_loadgen("search", "--url", url, *ISSUE_SEARCH, "--out", str(out), timeout=300)
    return r, read_json(str(out))


def test_a_clean_search_and_one_with_an_8s_stall_take_at_most_12_cells_and_agree(searched):
    answers = {}
    for name in ("clean", "stalled"):
        r, doc = searched[1][f"issue-{name}"]
        assert r.returncode == 0, r.stdout + r.stderr
        answer = answers[name] = doc["search"]["answers"]["60"]
        cells = [(c["concurrency"], c.get("again")) for c in doc["cells"]]
        assert answer["complete"] and len(doc["cells"]) == len(answer["probes"]) <= 12, (name, cells)
        assert answer["control_checks"] == 1 and cells[-1] == (1, 1), (name, cells)  # at the end only
        # a load with more than one cell is one the answer rests on (an end, extended or measured again), or
        # one that contradicted another: no growth probe left behind is extended
        twice = {c for c, again in cells if again} - {1}
        assert twice <= {answer["met"], answer["missed"]} | {a["load"] for a in answer["again"]}, (name, cells)
    clean, stalled = answers["clean"], answers["stalled"]
    # both brackets hold the server's edge: each met end lies below the other's missed end
    assert clean["met"] < stalled["missed"] and stalled["met"] < clean["missed"], (clean, stalled)
    low, high = sorted((clean["met"], stalled["met"]))
    assert SearchConfig().width_ok(low, high)  # within the resolution (10 %, or adjacent concurrencies)
