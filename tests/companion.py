"""Untimed test modules run beside the unit tier, in three companion pytest processes.

Most of the suite's wall time is waiting: a fault test waits out an idle timeout, a sweep waits for a restarted
server, an interrupt test for a drain. A module marked `untimed` (its `pytestmark`) checks outcomes, files and
words, never a time against the machine, so it may run while the machine is busy with other work. At the end of
the collection (`start`), the session hands the selected untimed tests to `LANES` companion processes (`python -m
pytest` on their node ids), which run beside the unit tier and the waiting builds (tests/side_by_side.py), one
from the first module on, one from the last module back, one from the middle on (`order`); each claims a module
before it runs it (a file created with O_EXCL), so they meet and no module runs twice. The first test of another
tier than `unit` waits until all have ended (`wait`), so that nothing timed against the machine runs beside them.
Each untimed test is then reported in the session from what its companion ran (`replay`: pytest's own report
serialisation, as pytest-xdist uses it), with its outcome, its captured output and its time; one no companion ran
(a companion that died) runs in the session as any other. `LOADGEN_TEST_COMPANIONS=0` runs them all in the
session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

LANE = "LOADGEN_TEST_LANE"  # set in a companion: its lane (0: from the first module, 1: from the last, 2: the middle)
CLAIMS = "LOADGEN_TEST_CLAIMS"  # the folder where companions claim modules
REPORTS = "LOADGEN_TEST_REPORTS"  # the file a companion appends its reports to, one JSON object a line
ROOT = Path(__file__).resolve().parents[1]
LANES = 3  # measured: with two the session waited 64 s for them after the unit tier, with three 6 s

_LANES: list[tuple[subprocess.Popen, Path, Path]] = []  # (process, its reports, its output)
_SENT: set[str] = set()  # the node ids handed to the companions
_REPORTS: dict[str, list[dict]] | None = None  # node id -> its serialised reports, once all have ended
_TIMES: dict[str, float] = {}  # started, waited (the session's wait for them), ended (monotonic s)


def lane() -> int | None:
    """This process's lane when it is a companion, else None."""
    value = os.environ.get(LANE)
    return int(value) if value is not None else None


def untimed(item) -> bool:
    return item.get_closest_marker("untimed") is not None and item.get_closest_marker("unit") is None


def start(session) -> list[str]:
    """Start the companions on the selected untimed tests (none in a companion, under --collect-only, with
    LOADGEN_TEST_COMPANIONS=0, or without such a test); returns the node ids handed over."""
    if lane() is not None or os.environ.get("LOADGEN_TEST_COMPANIONS") == "0" or session.config.option.collectonly:
        return []
    ids = [item.nodeid for item in session.items if untimed(item)]
    if not ids:
        return []
    base = session.config._tmp_path_factory.getbasetemp() / "c"  # short: paths in a test's lines may wrap
    claims = base / "claims"
    claims.mkdir(parents=True, exist_ok=True)
    for n in range(int(os.environ.get("LOADGEN_TEST_LANES", LANES))):
        reports, output = base / f"lane-{n}.jsonl", base / f"lane-{n}.out"
        env = {**os.environ, LANE: str(n), CLAIMS: str(claims), REPORTS: str(reports)}
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(base / str(n)),
                *ids]
        with open(output, "wb") as out:
            _LANES.append((subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT),
                           reports, output))
    _SENT.update(ids)
    _TIMES["started"] = time.monotonic()
    return ids


def order(items: list) -> None:
    """In a companion: its modules' order. Lane 0 takes them from the first on, lane 1 from the last back, lane 2
    (when there are three) from the middle on; each module's tests stay in their order."""
    n = lane()
    if not n:
        return
    modules = list(dict.fromkeys(item.path for item in items))
    if n == 1:
        modules.reverse()
    else:
        middle = len(modules) // 2
        modules = modules[middle:] + modules[:middle]
    rank = {path: i for i, path in enumerate(modules)}
    items.sort(key=lambda item: rank[item.path])


def claimed(item) -> bool:
    """In a companion: whether this process runs `item`'s module (the first lane to reach a module claims it)."""
    mine = getattr(item.session, "_loadgen_claimed", None)
    if mine is None:
        mine = item.session._loadgen_claimed = {}
    if item.path not in mine:
        name = str(item.path.relative_to(ROOT)).replace(os.sep, "__")
        try:
            os.close(os.open(Path(os.environ[CLAIMS]) / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            mine[item.path] = True
        except FileExistsError:
            mine[item.path] = False
    return mine[item.path]


def record(config, report) -> None:
    """In a companion: append `report` (setup, call or teardown of a test it ran) to its reports file."""
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    with open(os.environ[REPORTS], "a") as fh:
        fh.write(json.dumps(data) + "\n")


def wait() -> None:
    """Until every companion has ended (a no-op in a session that started none)."""
    global _REPORTS
    if _REPORTS is not None or not _LANES:
        return
    found: dict[str, list[dict]] = {}
    _TIMES["waited"] = time.monotonic()
    for proc, reports, output in _LANES:
        proc.wait()
        if reports.exists():
            for line in reports.read_text().splitlines():
                data = json.loads(line)
                if isinstance(data.get("longrepr"), list):  # a skip's (path, line, reason): JSON has no tuples
                    data["longrepr"] = tuple(data["longrepr"])
                found.setdefault(data["nodeid"], []).append(data)
        if proc.returncode not in (0, 1, 5):  # 1: a test failed, reported as such; 5: nothing of its own ran
            sys.stderr.write(f"\ncompanion {output.name} ended with {proc.returncode}:\n"
                             f"{output.read_text()[-3000:]}\n")
    _REPORTS = found
    _TIMES["ended"] = time.monotonic()


def summary() -> str | None:
    """'companions: 160 tests in 212 s beside the unit tier; the session waited 35 s for them', once they ran."""
    if "ended" not in _TIMES:
        return None
    ran = sum(1 for reports in (_REPORTS or {}).values() if reports)
    return (f"companions: {ran} untimed tests in {_TIMES['ended'] - _TIMES['started']:.0f} s beside the unit tier; "
            f"the session waited {_TIMES['ended'] - _TIMES['waited']:.0f} s for them (tests/companion.py)")


def replay(item) -> bool:
    """Report `item` from what its companion ran; False when no companion ran it (it then runs here)."""
    if item.nodeid not in _SENT:
        return False
    wait()
    assert _REPORTS is not None
    found = _REPORTS.get(item.nodeid)
    if not found or found[-1].get("when") != "teardown":
        return False
    hook = item.ihook
    hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for data in found:
        report = item.config.hook.pytest_report_from_serializable(config=item.config, data=data)
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def stop() -> None:
    """End the companions still running (an interrupted session)."""
    from tests.conftest import stop_process  # conftest imports this module: its helper is reached at the end
    for proc, _, _ in _LANES:
        stop_process(proc)

