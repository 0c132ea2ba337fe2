"""Network faults through a real TCP proxy process (tests/fault_proxy.py) between loadgen (the real CLI) and the
simulator: each fault ends as a named outcome in the records, every planned request has its record, and the
keep-alive race is retried once on a new connection, counted, only where the request never reached the server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_loadgen, start_sim, stop_process

pytestmark = pytest.mark.sim

REQUESTS = 8


def start_proxy(upstream: str, *flags: str) -> tuple[subprocess.Popen, str]:
    host_port = upstream.split("//", 1)[1].rstrip("/")
    proc = subprocess.Popen([sys.executable, "-m", "tests.fault_proxy", "--upstream", host_port, *flags],
                            stdout=subprocess.PIPE, cwd=ROOT)
    line = proc.stdout.readline().decode()
    m = re.search(r"ready on (\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"fault proxy did not start: {line!r}")
    return proc, m.group(1)


def measured(tmp_path: Path, url: str, *args: str, client: str = "h1") -> tuple[int, list[dict]]:
    out = tmp_path / f"run-{client}.json"
    res = run_loadgen("--url", url, "--concurrency", "2", "--contexts", "60", "--max-tokens", "48",
                      "--requests-per-cell", str(REQUESTS), "--out", str(out), "--http-client", client,
                      "--wait-ready", "0", "--on-server-down", "skip", "--max-failed-fraction", "1", *args, timeout=120)
    path = Path(str(out)[:-len(".json")] + ".requests.jsonl")
    recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    recs = [r for r in recs if r.get("phase") == "measure"]
    assert len(recs) == REQUESTS, (res.returncode, res.stderr[-2000:])  # nothing lost
    return res.returncode, recs


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory):
    """One simulator for the file: each test puts a proxy of its own in front of it (no test reads its truth)."""
    sim = start_sim(tmp_path_factory.mktemp("sim"))
    yield sim.url
    sim.stop()


@pytest.fixture
def proxied(sim_url):
    procs: list[subprocess.Popen] = []

    def start(*flags: str) -> str:
        proc, url = start_proxy(sim_url, *flags)
        procs.append(proc)
        return url

    yield start
    for p in procs:
        stop_process(p)


@pytest.mark.untimed  # outcomes and an idle timeout that load only lengthens
@pytest.mark.parametrize("flags", [("--latency-ms", "20", "--jitter-ms", "15"), ("--bandwidth-bps", "200000"),
                                   ("--trickle-head",)], ids=["latency+jitter", "bandwidth", "trickled head"])
def test_a_slow_network_changes_times_not_outcomes(proxied, tmp_path, flags):
    _, recs = measured(tmp_path, proxied(*flags))
    assert [r["outcome"] for r in recs] == ["ok"] * REQUESTS
    assert all(r["retried_on_new_connection"] == 0 for r in recs)


@pytest.mark.untimed  # outcomes and an idle timeout that load only lengthens
@pytest.mark.parametrize("client", ["h1", "aiohttp"])
def test_a_reset_mid_stream_is_a_connection_error_and_never_retried(proxied, tmp_path, client):
    _, recs = measured(tmp_path, proxied("--reset-after-bytes", "1500"), client=client)
    assert {r["outcome"] for r in recs} == {"connection_error"}, [r.get("error") for r in recs]
    assert all(r["retried_on_new_connection"] == 0 and r["chunks"] > 0 for r in recs)  # it had reached the server


@pytest.mark.untimed  # outcomes and an idle timeout that load only lengthens
def test_a_half_open_peer_ends_in_the_idle_timeout(proxied, tmp_path):
    # every request waits out the timeout, two at a time: 1 s keeps that short, far above the ~12 ms between chunks
    _, recs = measured(tmp_path, proxied("--half-open-after-bytes", "1500"), "--idle-timeout", "1")
    assert {r["outcome"] for r in recs} == {"timeout"}
    assert all(r["error"].startswith("idle timeout (1 s)") for r in recs), recs[0]["error"]


# timed: the pool must hand out the warmed connection before it reads the proxy's close, which a busy machine
# can turn around; so it runs in the session, alone
@pytest.mark.parametrize("client", ["h1", "aiohttp"])
def test_a_connection_closed_as_it_is_reused_is_retried_once_on_a_new_one(proxied, tmp_path, client):
    _, recs = measured(tmp_path, proxied("--close-on-reuse"), client=client)
    assert [r["outcome"] for r in recs] == ["ok"] * REQUESTS, [r.get("error") for r in recs]
    # every connection carries one request. The h1 pool hands out a warmed (reused) connection to every
    # request: each is retried once. aiohttp may open a new one itself when it saw the close first: 0 retries
    retried = [r["retried_on_new_connection"] for r in recs]
    assert retried == [1] * REQUESTS if client == "h1" else set(retried) <= {0, 1} and sum(retried) >= 1, retried
