"""--wait-ready: a server that is starting is waited for, not treated as bad input. Real simulators that load
for 15 s (every route 503) or answer health while generation fails for 15 s (a stale process), a port that
refuses connections until the server comes up; a name that does not resolve is still exit 2 at once."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, run_loadgen
from tests.faults_util import assert_accounted, outputs, wait_truth

pytestmark = pytest.mark.sim

PLANNED = 16
ARGS = ("--concurrency", "4", "--contexts", "60", "--max-tokens", "64", "--requests-per-cell", str(PLANNED),
        "--server-metrics", "off")


def measured_everything(out, sim) -> None:
    """Every planned request was sent once, succeeded, and is the simulator's own ok request."""
    doc, records = outputs(out)
    assert_accounted(doc, records, PLANNED)
    measured = [r for r in records if r["phase"] == "measure"]
    assert len(measured) == PLANNED and {r["outcome"] for r in measured} == {"ok"}
    assert doc["cells"][0]["status"] == "ok" and doc["cells"][0]["requests_not_sent"] == 0
    ids = {r["request_id"] for r in measured}
    truth = wait_truth(sim, lambda rows: ids <= {t["rid"] for t in rows})
    assert all(truth[r["request_id"]]["outcome"] == "ok" for r in measured)
    assert all(r["completion_tokens"] == truth[r["request_id"]]["completion_tokens"] == 64 for r in measured)


STARTING = {"loading-503": ("--loading", "/health_generate answered 503"),  # every route 503 while loading
            "stale-health": ("--slow-start", "/health_generate answered 503")}  # health 200, generation fails


# timed: it needs loadgen started well within the servers' 10 s of loading, which a busy machine can delay by
# seconds (one line, ready after 4.1 s, beside the unit tier); so it runs in the session, alone
def test_starting_servers_are_waited_for_and_then_measured(tmp_path, sim_factory):
    """Both kinds of start, 10 s each, side by side (one wait of 10 s for the two): loadgen, started a second or
    two after the servers, waits long enough to say so at the start and 5 s later."""
    sims = {name: sim_factory("--speed", "8", flag, "10", name=f"{name}.truth.jsonl")
            for name, (flag, _) in STARTING.items()}
    t0 = time.monotonic()
    runs = {name: subprocess.Popen([sys.executable, "-m", "loadgen", "--url", sim.url, *ARGS,
                                    "--out", str(tmp_path / f"{name}.json")], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, sim in sims.items()}
    for name, proc in runs.items():
        sim, (flag, state) = sims[name], STARTING[name]
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        waits = [ln for ln in stderr.splitlines() if ln.startswith(f"waiting for {sim.url} to be ready: ")]
        # a line at the start and about every 5 s after: what it waits for, for how long, and the limit
        assert len(waits) >= 2, stderr
        assert all(ln.endswith(f"of 600 s (--wait-ready): {state}") for ln in waits[:2]), waits
        ready = re.search(rf"{re.escape(sim.url)} is ready after ([\d.]+) s", stderr)
        assert ready and float(ready.group(1)) <= time.monotonic() - t0
        measured_everything(tmp_path / f"{name}.json", sim)
        if flag == "--slow-start":  # the stale process answered health all along: generation was what failed
            assert "/health answered" not in stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_connection_refused_means_not_up_yet(tmp_path, sim_factory):
    port = free_port()
    out = tmp_path / "r.json"
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "--url", f"http://127.0.0.1:{port}", *ARGS,
                                 "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=fh)
    try:
        deadline = time.monotonic() + 30
        while "connection refused: nothing listens on" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        sim = sim_factory("--port", str(port), "--speed", "8")
        assert proc.wait(120) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    measured_everything(out, sim)


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_a_wrong_port_says_so_at_once_and_an_interrupt_then_names_no_results_file(tmp_path):
    """The first line names the refused connection and --wait-ready 0 within 10 s; interrupted before the first
    cell, loadgen says nothing was measured and names no results file (none was written)."""
    port = free_port()
    out = tmp_path / "r.json"
    err = tmp_path / "stderr.txt"
    t0 = time.monotonic()
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "--url", f"http://127.0.0.1:{port}",
                                 "--concurrency", "1", "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=fh)
    try:
        while not err.read_text().endswith("\n"):
            assert proc.poll() is None and time.monotonic() - t0 < 10, err.read_text()
            time.sleep(0.02)
        lines = err.read_text().splitlines()
        first = " ".join([lines[0], *[ln.strip() for ln in lines[1:] if ln.startswith("    ")]])  # wrapped
        assert all(len(ln) <= 120 for ln in lines), lines
        assert f"connection refused: nothing listens on 127.0.0.1:{port}" in first, first
        assert "given up after 30 s of refusals from the first try" in first and "0 fails at once" in first
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    last = err.read_text().strip().splitlines()[-1]
    assert last == "interrupted by SIGTERM before the first cell: nothing was measured, no results file was written"
    assert not out.exists() and str(out) not in err.read_text()


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_a_name_that_does_not_resolve_is_bad_input_at_once(tmp_path):
    t0 = time.monotonic()
    run = run_loadgen("--url", "http://no-such-host.invalid:30000", *ARGS, "--out", str(tmp_path / "r.json"))
    assert run.returncode == 2
    assert run.stderr.startswith("loadgen: error: --url http://no-such-host.invalid:30000: the host name "
                                 "'no-such-host.invalid' does not resolve")
    assert len(run.stderr.strip().splitlines()) == 1
    assert time.monotonic() - t0 < 30  # not the 600 s wait


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_a_server_that_stays_broken_ends_the_wait(tmp_path, sim_factory):
    sim = sim_factory("--speed", "8", "--stale-health")
    run = run_loadgen("--url", sim.url, *ARGS, "--wait-ready", "3", "--out", str(tmp_path / "r.json"))
    assert run.returncode == 2
    last = run.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"loadgen: error: {re.escape(sim.url)} is not ready after \d+ s: /health_generate "
                        r"answered 503; check the server, or give it longer with --wait-ready SECONDS", last), last
    assert not (tmp_path / "r.requests.jsonl").exists()  # nothing was sent


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_wait_ready_zero_fails_at_once(tmp_path, sim_factory):
    sim = sim_factory("--speed", "8", "--loading", "60")
    t0 = time.monotonic()
    run = run_loadgen("--url", sim.url, *ARGS, "--wait-ready", "0", "--out", str(tmp_path / "r.json"))
    assert run.returncode == 2 and "waiting for" not in run.stderr
    assert run.stderr == (f"loadgen: error: {sim.url}/v1/models answered 503: the server is not ready (still "
                          "loading?); wait for it with --wait-ready SECONDS (0 gives up at once)\n")
    assert time.monotonic() - t0 < 30


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_ctrl_c_ends_the_wait(tmp_path, sim_factory):
    sim = sim_factory("--speed", "8", "--stale-health")
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "--url", sim.url, *ARGS, "--out",
                                 str(tmp_path / "r.json")], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=fh)
    try:
        deadline = time.monotonic() + 30
        while "waiting for" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, err.read_text()
        assert time.monotonic() - t0 < 10  # the first Ctrl-C, not the 600 s limit
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err.read_text()
    assert not (tmp_path / "r.requests.jsonl").exists()


async def wait_for(url: str, timeout_s: float, never_answered_s: float | None) -> tuple[str, float]:
    """ReadyWait's check against `url`, in this process: its error and how long it took."""
    import aiohttp

    from loadgen.errors import UsageError
    from loadgen.run.control import RunControl
    from loadgen.run.ready_wait import ReadyWait

    wait = ReadyWait(timeout_s, "openai-chat", None, {}, RunControl(), never_answered_s)
    t0 = time.monotonic()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(UsageError) as exc:
            await wait.check(session, url)
    return str(exc.value), time.monotonic() - t0


@pytest.mark.untimed  # what it says and how it ends; its bounds in seconds are far above a busy machine's delays
def test_a_port_that_never_answered_is_given_up_but_a_loading_one_is_waited_for():
    """Never answered (refused from the first try): given up at the limit, far before --wait-ready's time.
    Was up or is loading (every route 503): the full time, the limit notwithstanding."""
    import asyncio

    from aiohttp import web

    async def both() -> None:
        msg, took_s = await wait_for(f"http://127.0.0.1:{free_port()}", 60, never_answered_s=1.0)
        assert msg.startswith("http://127.0.0.1:") and "refused connections for 1 s (wrong port?)" in msg, msg
        assert "--wait-ready S waits longer" in msg and 1.0 <= took_s < 20
        async def loading(request: web.Request) -> web.Response:
            return web.Response(status=503)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", loading)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
            msg, took_s = await wait_for(url, 3.0, never_answered_s=1.0)
        finally:
            await runner.cleanup()
        assert msg.startswith(f"{url} is not ready after 3 s") and "answered 503" in msg, msg
        assert took_s >= 3.0

    asyncio.run(both())
