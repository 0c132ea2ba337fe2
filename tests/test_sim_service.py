"""The simulator as a restartable service (`loadgen.sim.service`, `--pidfile`, `--detach`, `--exit-idle`): the
parts that need no process of their own. The sweep example (tests/test_sweep.py) runs them for real."""

from __future__ import annotations

import os

import pytest

from loadgen.sim.config import SimConfig
from loadgen.sim.engine import Engine
from loadgen.sim.model import Roofline, SpecConfig
from loadgen.sim.server import SimServer
from loadgen.sim.service import stop_previous, without_detach, write_pid
from loadgen.sim.truth import TruthLog

pytestmark = pytest.mark.unit


def test_the_detached_child_is_the_same_command_less_detach():
    assert without_detach(["--port", "1", "--detach", "x.log", "--budget", "16"]) == ["--port", "1", "--budget", "16"]
    assert without_detach(["--detach=x.log", "--topk", "8"]) == ["--topk", "8"]


def test_a_pidfile_naming_anything_but_a_running_simulator_stops_nothing(tmp_path):
    pidfile = tmp_path / "deep" / "sim.pid"
    assert stop_previous(str(pidfile)) is None  # no file
    for pid in (os.getpid(), os.getppid(), 2**22 + 12345):  # this process, its parent (not `loadgen sim`), none
        write_pid(str(pidfile), pid)
        assert stop_previous(str(pidfile)) is None
    pidfile.write_text("not a pid")
    assert stop_previous(str(pidfile)) is None


def test_idle_time_counts_from_the_last_request_and_not_while_one_is_served():
    server = SimServer(Engine(SpecConfig(budget=8, topk=4, block_size=16, algorithm="DDTREE"), Roofline()),
                       SimConfig(), TruthLog(None))
    server.last_request_end_s -= 5
    assert server.idle_s() >= 5
    server.in_flight = 1
    assert server.idle_s() == 0
