"""Shared fixtures: the simulator as a real subprocess on a free loopback port, and loadgen as a real CLI."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from tests import companion, forked

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("unit", "sim", "engine", "infra")  # registered in pyproject.toml; tests/README.md "Tiers"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: a test without a tier is never silently left out
def pytest_collection_modifyitems(config, items):
    """Each test carries exactly one tier marker, so that `-m unit` (or any tier) selects what it says."""
    for item in items:
        tiers = [m.name for m in item.iter_markers() if m.name in TIERS]
        if len(tiers) != 1:
            found = ", ".join(tiers) if tiers else "none"
            raise pytest.UsageError(f"{item.nodeid}: needs exactly one tier marker of {', '.join(TIERS)} "
                                    f"(found {found}); see tests/README.md \"Tiers\"")
    # the unit tier first, while the waiting builds and the companions run (tests/side_by_side.py,
    # tests/companion.py); then the untimed tests the companions ran; then the modules that read the builds, so
    # that their processes are stopped before the rest; each group in the files' order
    from tests import side_by_side
    built = side_by_side.modules()
    def group(item) -> tuple[bool, bool, bool]:
        module = getattr(item, "module", None)
        reads_a_build = module is not None and module.__name__.rsplit(".", 1)[-1] in built
        return item.get_closest_marker("unit") is None, not companion.untimed(item), not reads_a_build
    items.sort(key=group)
    companion.order(items)


def pytest_collection_finish(session):
    """Note the waiting module fixtures of the selected tests, to be built side by side (tests/side_by_side.py),
    and start them, beside the unit tier, when a test of another tier reads them."""
    from tests import side_by_side
    factory = session.config._tmp_path_factory
    factory.getbasetemp()  # made once here: the builds' threads would each make one at once, and race on it
    side_by_side.select(session.items, factory.mktemp)
    if not session.config.option.collectonly:
        side_by_side.start_selected()
    companion.start(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A companion runs only the modules it claimed; the session reports what the companions ran."""
    if companion.lane() is not None:
        return None if companion.claimed(item) else True
    return True if companion.replay(item) else None


def pytest_runtest_logreport(report):
    if companion.lane() is not None:
        companion.record(_CONFIG[0], report)


def pytest_configure(config):
    _CONFIG[:] = [config]


_CONFIG: list = []  # the session's config, for the companions' reports


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """No test of another tier than `unit` runs beside a build or a companion: the first one waits until they
    have all ended."""
    if item.get_closest_marker("unit") is None:
        from tests import side_by_side
        side_by_side.wait_all()
        companion.wait()


def pytest_terminal_summary(terminalreporter):
    said = companion.summary()
    if said:
        terminalreporter.write_line(said)


def pytest_sessionfinish(session):
    from tests import side_by_side
    companion.stop()
    side_by_side.finish_all()
    forked.shutdown()


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s; returns once the process is gone."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

class SimHandle:
    def __init__(self, proc: subprocess.Popen, url: str, truth: Path):
        self.proc = proc
        self.url = url
        self.truth = truth

    def truth_rows(self) -> list[dict]:
        from loadgen.sim.truth import read_truth
        return read_truth(str(self.truth)) if self.truth.exists() else []

    def stop(self) -> None:
        stop_process(self.proc)


def start_sim(tmp_path: Path, *args: str, name: str = "truth.jsonl", env: dict | None = None,
              pin_speed: bool = True, fresh: bool = False) -> SimHandle:
    """`loadgen sim` on a free port. Without `--speed` in `args` it runs at speed 1 (`pin_speed`): the tests
    were written against the calibrated step times, before the one default became 4. Forked from the session's
    process that has imported loadgen (tests/forked.py), or started afresh (`fresh`) as loadgen starts its
    built-in simulator."""
    truth = tmp_path / name
    if pin_speed and "--speed" not in args:
        args = ("--speed", "1", *args)
    proc = forked.spawn(["sim", "--port", "0", "--truth", str(truth), *args], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, fresh=fresh)
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if b"ready on" in line or not line:
            break
    m = re.search(rb"ready on (http://\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"simulator did not start: {line!r} {proc.stderr.read()[:500]!r}")
    return SimHandle(proc, m.group(1).decode(), truth)


@pytest.fixture
def sim_factory(tmp_path):
    started: list[SimHandle] = []

    def factory(*args: str, **kw) -> SimHandle:
        h = start_sim(tmp_path, *args, **kw)
        started.append(h)
        return h

    yield factory
    for h in started:
        h.stop()


# The drift check measures a run's first cell again after the last: tests about anything else count their cells'
# records without that control (subprocesses inherit this); tests of the check give --drift-check themselves.
os.environ.setdefault("LOADGEN_DRIFT_CHECK", "off")


def said(text: str) -> str:
    """What a console text says, its lines wrapped at 120 columns (`console.wrap`) joined again: every run of
    whitespace one space, so a test can look for a message however it was wrapped."""
    return " ".join(text.split())


def said_lines(text: str) -> list[str]:
    """The console's lines as they were said before `console.wrap` broke them: a line indented deeper than the
    one before it continues it (joined with the space the break took)."""
    lines: list[str] = []
    for line in text.splitlines():
        lead = len(line) - len(line.lstrip(" "))
        if lines and lead > len(lines[-1]) - len(lines[-1].lstrip(" ")) and line.strip():
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def run_loadgen(*args: str, timeout: float = 120, env: dict | None = None, cwd: Path | None = None):
    """Run the real CLI in a process of its own (forked from one that imported it: tests/forked.py); returns a
    CompletedProcess with text stdout/stderr."""
    return forked.run(list(args), timeout=timeout, cwd=cwd or ROOT, env={**os.environ, **(env or {})})


class CliResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """The CLI in this process, for input checks that need no process of their own: `cli(*argv, env=…,
    unset=…)` calls `loadgen.cli.main.main(argv)` and returns its exit status (an argparse error's
    `SystemExit.code`) and what it wrote, as `run_loadgen` does for a real process. Variables in `env` are
    set and those in `unset` removed for the call; the event-loop policy main() installs (uvloop) is put back."""
    from loadgen.cli.main import main

    def run(*argv: str, env: dict | None = None, unset: tuple[str, ...] = ()) -> CliResult:
        capsys.readouterr()
        policy = asyncio.get_event_loop_policy()
        with monkeypatch.context() as mp:
            for name in unset:
                mp.delenv(name, raising=False)
            for name, value in (env or {}).items():
                mp.setenv(name, value)
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code
            finally:
                asyncio.set_event_loop_policy(policy)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@contextlib.asynccontextmanager
async def serve_metrics_app(app):
    """Serve an aiohttp app on a free loopback port; yields its /metrics URL."""
    from aiohttp import web
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await runner.cleanup()


# ---- the machine's own lag, as a reference for client-health verdicts --------------------------------------
_PROBE = r'''
import asyncio, sys, time
async def main():
    loop = asyncio.get_running_loop()
    done, lags = asyncio.Event(), []
    loop.add_reader(sys.stdin.fileno(), done.set)  # the test closes stdin when the run is over
    while not done.is_set():
        t0 = time.monotonic()
        await asyncio.sleep(0.005)
        lags.append(time.monotonic() - t0 - 0.005)
    print(max(lags), len(lags))
asyncio.run(main())
'''


@contextlib.contextmanager
def machine_lag():
    """How late the machine itself wakes an event loop while the block runs: a process with nothing to do but
    5 ms sleeps (200 samples a second; loadgen's own sampler takes 20). Yields a dict, filled at the end with
    max_s (the worst lateness) and samples. A client's timers on this machine are at least this late."""
    probe = subprocess.Popen([sys.executable, "-c", _PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    seen: dict = {}
    try:
        yield seen
    finally:
        out, _ = probe.communicate(timeout=30)
        max_s, samples = out.split()
        seen.update(max_s=float(max_s), samples=int(samples))


def machine_flagged(client: dict, machine: dict) -> str | None:
    """Why a client-health verdict of saturated is a fact about the machine, or None when it is the client's:
    it was flagged for event-loop lag alone (no process over the CPU limit), while an idle event loop beside
    it was held up at least half the lag limit."""
    from loadgen.metrics.client_health import CPU_LIMIT_PERCENT, LAG_P99_LIMIT_S
    cpus = [client.get("cpu_percent")] + [w.get("cpu_percent") for w in client.get("per_worker", [])]
    lag_only = all("event-loop lag" in r for r in client["reasons"]) and all(
        c is None or c <= CPU_LIMIT_PERCENT for c in cpus)
    if not (client["saturated"] and lag_only and machine["max_s"] >= LAG_P99_LIMIT_S / 2):
        return None
    return (f"this machine stalls idle event loops: {machine['max_s'] * 1e3:.1f} ms beside the run (the "
            f"client's lag p99 {client['loop_lag_p99_s'] * 1e3:.1f} ms, limit {LAG_P99_LIMIT_S * 1e3:.0f} ms: "
            f"{client['reasons']}); whether this client kept up cannot be told here")
