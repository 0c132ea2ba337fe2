"""Which auto-named file the same command resumes without --out, and the command an interrupt prints (files in
a temporary folder; no server)."""

from __future__ import annotations

import os
import shlex

import pytest

from loadgen.cli.resume import find_interrupted, resume_command
from loadgen.cli.run_config import config_from_args
from loadgen.cli.run_options import run_parser
from loadgen.files import read_json, write_json_atomic
from loadgen.record import CellKey
from loadgen.results.build_cell import unmeasured
from loadgen.results.incidents import IncidentKind
from loadgen.run.interrupts import shell_lines

pytestmark = pytest.mark.unit

ARGS = ["--concurrency", "1,4", "--contexts", "60", "--max-tokens", "32"]


def config(tmp_path, *extra: str):
    return config_from_args(run_parser().parse_args([*ARGS, *extra]))


def stored(tmp_path, name: str, cells: list, argv=ARGS, pid: int = 2 ** 22 + 7) -> str:
    """A results file as a run of `argv` left it, its cells given as (concurrency, incident kind, reason)."""
    cfg = config_from_args(run_parser().parse_args(argv))
    doc = {"args": cfg.public_args(), "host": {"boot_id": "another boot", "pid": pid},
           "cells": [unmeasured(CellKey(60, c), kind, reason).to_json() for c, kind, reason in cells]}
    path = str(tmp_path / "results" / name)
    write_json_atomic(path, doc)
    return path


NOT_REACHED = IncidentKind.NOT_REACHED


def test_the_interrupted_file_of_the_same_settings_is_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config(tmp_path)
    assert cfg.out_auto and find_interrupted(cfg) is None
    stored(tmp_path, "loadgen-1.json", [(1, NOT_REACHED, "not measured: interrupted by SIGINT")],
           argv=[*ARGS, "--max-tokens", "64"])  # other settings
    gone = "not measured: the server went away"
    stored(tmp_path, "loadgen-2.json", [(1, NOT_REACHED, gone), (4, NOT_REACHED, gone)])  # ended, not interrupted
    assert find_interrupted(cfg) is None
    killed = stored(tmp_path, "loadgen-3.json", [])  # killed before its first cell ended
    assert find_interrupted(cfg) == os.path.join("results", "loadgen-3.json") == os.path.relpath(killed)
    os.utime(killed, (1, 1))
    before = IncidentKind.INTERRUPTED_BEFORE  # the kind says it, whatever the reason's words
    newest = stored(tmp_path, "loadgen-4.json", [(1, before, "not measured: stopped"), (4, before, "not measured")])
    assert find_interrupted(cfg) == os.path.join("results", "loadgen-4.json")  # the newest
    os.utime(newest, (2, 2))
    # a file written before the kind existed: its not_reached cells an interrupt stopped are read as such
    stored(tmp_path, "loadgen-5.json", [(1, NOT_REACHED, "not measured: interrupted by SIGTERM")])
    assert find_interrupted(cfg) == os.path.join("results", "loadgen-5.json")
    assert not config(tmp_path, "--out", "mine.json").out_auto and not config(tmp_path, "--label", "x").out_auto


def test_a_run_still_writing_its_file_is_not_resumed(tmp_path, monkeypatch):
    from loadgen.results.document import host_identity
    monkeypatch.chdir(tmp_path)
    path = stored(tmp_path, "loadgen-1.json", [])
    doc = read_json(path)
    doc["host"] = {"boot_id": host_identity()["boot_id"], "pid": os.getppid()}  # alive: our parent
    write_json_atomic(path, doc)
    assert find_interrupted(config(tmp_path)) is None


def test_the_resume_command_names_out_drops_force_and_fits_120_columns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config(tmp_path, "--force")
    argv = resume_command([*ARGS, "--force"], cfg)
    assert argv[-2:] == ["--out", cfg.out] and "--force" not in argv
    assert resume_command([*ARGS, "--out", "x.json"], cfg)[-2:] == ["--out", "x.json"]
    long = [*argv, "--prompts", "a file with spaces.jsonl", "--label", "x" * 130]
    lines = shell_lines(long, "resume with:")
    assert all(len(ln) <= 120 for ln in lines[:-1]) and len(lines) > 2
    assert all(ln.endswith(" \\") for ln in lines[:-1])
    joined = " ".join(ln.removesuffix(" \\").strip() for ln in lines)
    assert shlex.split(joined.removeprefix("resume with: ")) == long
