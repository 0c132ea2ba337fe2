"""Never lose a run: the same command again resumes an existing --out, or without --out the interrupted file of
the same settings (finished cells kept, the rest measured, their records kept and the new ones appended), other settings or another server are refused (exit 2) naming --force and --out, --force
replaces, and --out creates its folders. Real loadgen processes against real simulators."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from loadgen.files import read_json
from tests.conftest import ROOT, run_loadgen
from tests.faults_util import jsonl_lines, outputs
from tests.schema_check import assert_documented

pytestmark = [pytest.mark.sim, pytest.mark.untimed]  # nothing here is timed against the machine

# two cells of 8 requests; ~0.5 s per request at --sim-speed 8, so the second cell is long enough to be killed in
MATRIX = ("--concurrency", "2,4", "--contexts", "60", "--max-tokens", "600", "--requests-per-cell", "8",
          "--server-metrics", "off", "--sim-speed", "8")


def killed_after_first_cell(out: Path) -> None:
    """Start the run and SIGKILL it once the first cell is in the results file and the second is sending."""
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", *MATRIX, "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
        cells = read_json(str(out)).get("cells", []) if out.exists() else []
        if cells and len(jsonl_lines(out)) > 8:  # first cell saved, second cell's records arriving
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_the_same_command_again_resumes_and_appends(tmp_path):
    out = tmp_path / "new" / "folder" / "run.json"  # --out creates missing folders
    killed_after_first_cell(out)
    before = jsonl_lines(out)
    first = read_json(str(out))["cells"]
    assert [(c["concurrency"], c["status"]) for c in first] == [(2, "ok")]

    again = run_loadgen(*MATRIX, "--out", str(out))
    assert again.returncode == 0, again.stderr
    said = " ".join(ln.strip() for ln in again.stderr.splitlines())  # wrapped at 120 columns
    assert f"resuming {out}: 1 of 2 cells already measured (ctx=60 c=2), kept; measuring 1" in said
    assert (f"{str(out)[:-5]}.requests.jsonl: the kept cells' records stay, the new ones are appended; dropped "
            "") in said and "records of cells that are measured again (--force replaces both files)" in said
    doc, records = outputs(out)
    assert_documented(doc)
    assert [c["concurrency"] for c in doc["cells"]] == [2, 4]
    assert doc["cells"][0] == first[0]  # kept as it was, not measured again
    after = jsonl_lines(out)
    # appended: every earlier whole record of the kept cell is still there, in order; those of the cell the
    # kill cut short (measured again) are gone, as in a sweep
    kept = [line for line in before[:-1] if orjson.loads(line)["cell"]["concurrency"] == 2]
    assert after[:len(kept)] == kept
    new = [r for r in records if r["run_id"] == doc["run_id"]]
    assert len(new) == 8 and {r["cell"]["concurrency"] for r in new} == {4}
    assert doc["earlier_runs"][0]["run_id"] == first[0]["run_id"] != doc["run_id"]

    done = run_loadgen(*MATRIX, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "all 2 cells already measured; nothing to measure (--force measures them again)" in \
        " ".join(ln.strip() for ln in done.stderr.splitlines())
    assert jsonl_lines(out) == after


def test_other_settings_are_refused_and_force_replaces(tmp_path):
    out = tmp_path / "run.json"
    quick = ("--concurrency", "1", "--contexts", "60", "--max-tokens", "8", "--requests-per-cell", "4",
             "--server-metrics", "off")
    assert run_loadgen(*quick, "--out", str(out)).returncode == 0
    kept = out.read_bytes(), jsonl_lines(out)
    for other, diff in ((("--max-tokens", "16"), "max_tokens: 8 → 16"),
                        (("--concurrency", "1,2"), "concurrency: 1 → 1,2")):
        refused = run_loadgen(*quick, *other, "--out", str(out))
        assert refused.returncode == 2
        fix = "; --force replaces it, another --out keeps both"
        inline = f"loadgen: error: {out} was measured with other settings ({diff}){fix}"
        # within 120 columns, or (a long tmp path) the difference named on the line above
        expected = [inline] if len(inline) <= 120 else [
            f"{out}: {diff}", f"loadgen: error: {out} was measured with other settings (named above){fix}"]
        assert refused.stderr.strip().splitlines() == expected
        assert (out.read_bytes(), jsonl_lines(out)) == kept
    forced = run_loadgen(*quick, "--max-tokens", "16", "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    doc, records = outputs(out)
    assert doc["args"]["max_tokens"] == 16 and "earlier_runs" not in doc
    assert len(records) == 4 and {r["run_id"] for r in records} == {doc["run_id"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_of_another_configuration_is_refused(tmp_path, sim_factory):
    port = str(free_port())
    out = tmp_path / "run.json"
    sim = sim_factory("--port", port, "--speed", "8", "--budget", "8")
    args = ("--url", sim.url, "--concurrency", "1,2", "--contexts", "60", "--max-tokens", "8",
            "--requests-per-cell", "4", "--out", str(out))
    assert run_loadgen(*args).returncode == 0
    doc = read_json(str(out))
    doc["cells"][1]["status"] = "failed"  # a cell left to measure again beside one that is kept
    out.write_bytes(orjson.dumps(doc))
    sim.stop()
    sim = sim_factory("--port", port, "--speed", "8", "--budget", "16", name="truth-16.jsonl")  # same URL, another configuration
    changed = run_loadgen(*args)
    assert changed.returncode == 2
    assert f"{out} was measured on a server of another configuration (" in changed.stderr
    assert "speculative_ddtree_budget: 8 → 16" in changed.stderr and "pass --force" in changed.stderr
    # refused before any load: only 1-token readiness and sizing probes reached the new server
    assert sim.truth_rows() and all(r["max_tokens"] in (None, 1) for r in sim.truth_rows())


def interrupted_after_first_cell(cwd: Path, args: tuple[str, ...]) -> str:
    """Run loadgen in `cwd` without --out, SIGINT it once the first cell is saved; its stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
        found = list((cwd / "results").glob("loadgen-*.json"))
        if found and read_json(str(found[0])).get("cells"):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    return err


def test_the_same_command_without_out_resumes_the_interrupted_file(tmp_path):
    """Interrupted without --out: the last lines name the results and the exact command that resumes them
    (within 120 columns); the same command again finds that file, says so, and measures only what is left;
    the printed command then finds everything measured."""
    args = (*MATRIX, "--drift-check", "off")  # the first cell measured again would make the runs longer
    err = interrupted_after_first_cell(tmp_path, args)
    (path,) = (tmp_path / "results").glob("loadgen-*.json")
    name = f"results/{path.name}"
    lines = err.strip().splitlines()
    at = lines.index(f"interrupted by SIGINT; results: {name}")
    printed = " ".join(ln.rstrip(" \\").strip() for ln in lines[at + 1:])
    assert printed.startswith("resume with: ") and all(len(ln) <= 120 for ln in lines[at:]), lines[at:]
    command = shlex.split(printed.removeprefix("resume with: "))
    assert command == [sys.executable, "-m", "loadgen", *args, "--out", name]

    again = run_loadgen(*args, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})
    assert again.returncode == 0, again.stderr
    said = " ".join(ln.strip() for ln in again.stderr.splitlines())  # wrapped at 120 columns
    assert f"{name} is an interrupted run of the same settings and target: resuming it" in said
    assert f"resuming {name}: 1 of 2 cells already measured (ctx=60 c=2), kept; measuring 1" in said
    assert [p.name for p in (tmp_path / "results").glob("*.json")] == [path.name]  # no new file
    doc = read_json(str(path))
    assert [(c["concurrency"], c["status"]) for c in doc["cells"]] == [(2, "ok"), (4, "ok")]

    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "all 2 cells already measured; nothing to measure" in done.stderr
