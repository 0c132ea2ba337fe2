"""The setup scripts talk while they work: a long step (the 10-17 minute llama-server build) prints a progress
line every PROGRESS_EVERY_S seconds, and test-deps.sh says which packages it installs, why and as whom before
it installs anything. A fake slow step stands in for the build (a real one takes both cores for minutes)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.sim, pytest.mark.untimed]  # nothing here is timed against the machine

FAKE_BUILD = "echo '[3/10] Building CXX a.o'; sleep 1.1; echo '[7/10] Building CXX b.o'; sleep 0.4; exit 3"


def test_a_long_step_prints_progress_lines_and_keeps_its_exit_status(tmp_path):
    log = tmp_path / "build.log"
    run = subprocess.run(["bash", "-c", f'. scripts/progress.sh; with_progress "fake build" "{log}" bash -c "$0"',
                          FAKE_BUILD], cwd=ROOT, capture_output=True, text=True, timeout=30,
                         env={**os.environ, "PROGRESS_EVERY_S": "0.3"})
    assert run.returncode == 3, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) >= 3, run.stdout  # 1.5 s at one line per 0.3 s (a busy machine may lose some)
    assert all(re.fullmatch(rf"  fake build: \d+ s so far(, \d+/10 compile steps)?; log: {log}", line) for line in lines)
    assert "3/10 compile steps" in lines[0] and "7/10 compile steps" in lines[-1]
    assert "Building CXX b.o" in log.read_text()  # the step's own output went to its log


def test_test_deps_says_what_it_installs_and_why_before_installing(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    run = subprocess.run(["/bin/bash", "scripts/test-deps.sh", "--dry-run"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30, env={"PATH": str(empty)})
    assert run.returncode == 0, run.stderr
    head, *packages = run.stdout.splitlines()[:-1]
    who = "as root" if os.geteuid() == 0 else "through sudo"
    assert re.fullmatch(rf"test-deps: installing \d Debian package\(s\) with apt-get, {who}:", head)
    names = [p.split(":")[0].strip() for p in packages]
    assert {"prometheus", "prometheus-alertmanager", "docker-compose", "cmake", "ninja-build", "g++"} <= set(names)
    assert all(": " in p and len(p.split(": ", 1)[1]) > 5 for p in packages)  # each with why
    assert "10-17 minutes" in run.stdout.splitlines()[-1]
