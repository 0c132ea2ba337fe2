"""`loadgen compare --fail-on` on real runs against tests/reference_server.py (issue 32's done-when case): B's
server takes 10 % longer per step (`--step-ms 22` against 20), so its output tok/s is about 9 % lower; each run
is `--repeat 3`, whose t interval over the three measurements holds the run-to-run noise. The gate fails on the
drop (exit 1) and passes two runs of the same server (exit 0), also while another process keeps a core busy.

Each run is short (16 requests of 32 tokens at concurrency 8, ~1.3 s a repeat): a step of 20 ms makes the server's
pace, not the client's, set the figure, so a busy machine moves it less than the 5 % limit."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import run_loadgen
from tests.reference_server import start, stop

pytestmark = pytest.mark.sim

STEP_MS, SLOWER_STEP_MS = "100", "110"


def _run(url: str, out) -> str:
    proc = run_loadgen("--url", url, "--contexts", "60", "--concurrency", "8", "--max-tokens", "40",
                       "--requests-per-cell", "8", "--warmup", "0", "--repeat", "3", "--server-metrics", "off",
                       "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return str(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(A, A again, B, B's server): two runs of the same server and one of the server 10 % slower per step."""
    tmp = tmp_path_factory.mktemp("gate")
    (url, proc), (slow_url, slow_proc) = start(tmp, "--step-ms", STEP_MS), start(tmp, "--step-ms", SLOWER_STEP_MS)
    try:
        with ThreadPoolExecutor(3) as pool:  # side by side: the server's pace, not the client's, sets the figure
            yield *pool.map(_run, (url, url, slow_url), (tmp / "a.json", tmp / "a2.json", tmp / "b.json")), slow_url
    finally:
        stop(proc)
        stop(slow_proc)


def _gate_md(cli, a: str, b: str, summary):
    return cli("compare", a, b, "--fail-on", "out_tok_s:-5%", "--format", "md", "--summary-out", str(summary))


def test_a_ten_percent_drop_fails_the_gate(runs, cli, tmp_path):
    a, _, b, slow_url = runs
    summary = tmp_path / "summary.md"
    res = _gate_md(cli, a, b, summary)
    if res.returncode == 0 and "≈ within noise" in res.stdout:
        # Another tenant stalled a repeat (seen on a 2-core box at load 10: one 0.9 s gap in a stream), which widens
        # the t interval: the gate rightly calls it noise. The drop is measured again, once.
        summary.unlink()
        res = _gate_md(cli, a, _run(slow_url, tmp_path / "b_again.json"), summary)
    assert res.returncode == 1, res.stdout
    lines = res.stdout.splitlines()
    assert lines[0] == "### ❌ 1 regression beyond noise" and summary.read_text().strip() == res.stdout.strip()
    (row,) = [line for line in lines if line.startswith("| ctx 60 conc 8 | out_tok_s |")]
    change = float(row.split(" | ")[4].split("%")[0])
    assert -14 < change < -6 and row.endswith("❌ regressed |"), row


def test_two_runs_of_the_same_server_pass(runs, cli):
    a, a2, _, _ = runs
    res = cli("compare", a, a2, "--fail-on", "out_tok_s:-5%,garbage,failed")
    assert res.returncode == 0, res.stdout
    assert "gate --fail-on out_tok_s:-5%,garbage,failed: PASS: no regression beyond noise" in res.stdout
    assert "passed in every compared cell: garbage, failed" in res.stdout
    assert max(len(line) for line in res.stdout.splitlines()) <= 120
