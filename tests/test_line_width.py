"""Every line loadgen prints fits 120 columns, wrapped at spaces, never cut.

Real processes (tier `sim`): the README's first command (a shorter matrix, the same path: the built-in
simulator, the header, the progress lines, the table and its notes) and an interrupted search, whose resume
command is the search's own (a whole `loadgen search`: test_slo_sim.py; `loadgen sweep` of
docs/examples/sim_budget_sweep.toml: test_sweep.py). In-process (tier `unit`): the wrapping helper, notes that
name every row, the `*` mark's count, the default table's columns per kind of run."""

from __future__ import annotations

import io
import json
import shlex
import signal
import subprocess
import sys
import time

import pytest

from loadgen.console import WIDTH, wrap, wrap_lines
from loadgen.report import table
from loadgen.results.cell_result import CellResult, from_json
from loadgen.results.repeats import combine_repeats
from tests.cells import typed
from tests.conftest import ROOT, run_loadgen

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine

SHORT = ["--max-tokens", "32", "--requests-per-cell", "16", "--warmup", "2"]
SEARCH = ["search", "--contexts", "60", "--max-tokens", "32", "--slo", "ttft=20ms,tpot=25ms", "--warmup", "2",
          "--probe-min-requests", "16", "--probe-min-seconds", "1", "--drift-every", "0", "--max-cells", "4"]


def _too_wide(*texts: str) -> list[str]:
    return [line for text in texts for line in text.splitlines() if len(line) > WIDTH]


# ---- real processes -----------------------------------------------------------------------------------------
@pytest.mark.sim
def test_the_readmes_first_command_prints_nothing_wider_than_120_columns(tmp_path):
    res = run_loadgen("--concurrency", "1,32", "--contexts", "60,1024", *SHORT, "--out", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert _too_wide(res.stdout, res.stderr) == []
    said = " ".join(res.stderr.split())
    assert "speculative: algorithm=DDTREE" in said and "draft_model_path=" in said  # wrapped, not cut


@pytest.mark.sim
def test_an_interrupted_search_names_the_search_command_that_resumes_it(tmp_path):
    out = tmp_path / "s.json"
    args = [*SEARCH, "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:  # its first probe is written
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert _too_wide(stdout, stderr) == []
    lines = stderr[stderr.index("resume with:"):].splitlines()
    command = " ".join(ln.rstrip(" \\") for ln in lines[: next(i for i, ln in enumerate(lines)
                                                             if not ln.endswith("\\")) + 1])
    argv = shlex.split(command.removeprefix("resume with:"))
    assert argv[argv.index("search"):] == args  # after the program: the search's own arguments, exactly


# ---- in-process ---------------------------------------------------------------------------------------------
LONG = ("warning: prompts are estimated: the server has no tokenizer endpoint (/v1/tokenize, /tokenize), so each "
        "prompt's length is the corpus tokenizer's count plus the chat template's cost measured once; "
        "prompt_sizing.estimated is set in the results; --tokenizer-url URL or a server with /tokenize gives exact "
        "lengths")


@pytest.mark.unit
@pytest.mark.parametrize("text,indent", [(LONG, ""), ("  " + LONG, "  "), (LONG.replace(" ", "  ", 3), "")])
def test_wrap_breaks_at_spaces_with_a_hanging_indent_and_loses_no_word(text, indent):
    lines = wrap_lines(text)
    assert len(lines) > 2 and all(len(line) <= WIDTH for line in lines)
    assert lines[0].startswith(indent + "warning:")
    assert all(line.startswith(indent + "    ") and line[len(indent) + 4] != " " for line in lines[1:])
    assert " ".join(line.strip() for line in lines).split() == text.split()  # wrapped, never cut
    assert "--tokenizer-url" in " ".join(lines).split()  # a flag is never broken at its hyphens


@pytest.mark.unit
def test_wrap_leaves_short_lines_and_breaks_only_a_word_wider_than_a_line():
    assert wrap_lines("run r1: 4 cells") == ["run r1: 4 cells"]
    table_text = "   ctx  conc\n    60     1"
    assert wrap(table_text) == table_text  # each line of a text on its own; short ones untouched
    path = "/very/" + "long/" * 40 + "results.json"
    lines = wrap_lines(f"results: {path}")
    assert all(len(line) <= WIDTH for line in lines) and "".join(lines).replace(" ", "") == f"results:{path}"
    assert wrap_lines("x " * 30, width=20, indent="  ")[1].startswith("  x")


def _skipped(conc: int) -> CellResult:
    return typed({"context_tokens": 1024, "concurrency": conc, "status": "skipped", "requests": {"ok": 0, "failed": 0},
            "error": "not measured: the run was interrupted (SIGINT) before this cell"})


@pytest.mark.unit
def test_one_note_names_every_row_it_stands_for():
    cells = [_skipped(c) for c in (1, 8, 32, 64)]
    text = table.table(cells)
    notes = [line for line in text.splitlines() if line.startswith("n")]
    assert len(notes) == 1 and notes[0].startswith("n1 ctx 1024 conc 1, ctx 1024 conc 8, ctx 1024 conc 32, "
                                                   "ctx 1024 conc 64: SKIPPED")
    assert [line.split()[-1] for line in text.splitlines()[1:5]] == ["n1"] * 4


def _repeat(ttft_s: float, samples: int) -> dict:
    return {"context_tokens": 60, "concurrency": 16, "status": "ok", "output_tok_s": 1000.0,
            "requests": {"ok": samples, "failed": 0, "by_outcome": {"ok": samples}},
            "ttft_s": {"p50": ttft_s, "p99": 2 * ttft_s, "samples": samples},
            "request_tok_s": {"mean": 60.0, "p10": 50.0, "samples": samples}}


@pytest.mark.unit
def test_the_mark_counts_the_samples_the_shown_figure_was_computed_from():
    cell = combine_repeats([from_json(_repeat(0.01 * (i + 1), 48)) for i in range(3)])
    assert cell.to_json()["repeats"]["samples"]["ttft_s.p50"] == [48, 48, 48]
    row = table.table([cell]).splitlines()[1]
    p50, p99 = row.split()[6:8]
    assert p50 == "20.0" and p99 == "60.0*"  # the mean over 144 samples; the last run's p99 over its 48
    legend = " ".join(table.footnote([cell]).split())
    assert "fewer than 100 samples" in legend and "TTFT p50 is the mean over the runs" in legend
    one = from_json(_repeat(0.01, 300))
    assert "*" not in table.table([one]).splitlines()[1] and table.footnote([one]) is None


def _verified(ok: int, note: str = "") -> CellResult:
    return typed({"context_tokens": 60, "concurrency": 8, "status": "ok", "requests": {"ok": ok, "failed": 0},
            "output_tok_s": 5000.0, "correctness": {"checked": 8, "exact": 8}, "warnings": [note] if note else []})


@pytest.mark.unit
def test_the_default_columns_are_those_of_the_kind_of_run_whatever_the_cells_hold():
    plain = [c.header for c in table.default_columns([typed({"context_tokens": 60, "concurrency": 1})])]
    assert plain == ["ctx", "conc", "ok/fail", "out tok/s", "±95%", "req tok/s mean", "TTFT p50 ms", "TTFT p99 ms",
                     "E2E s", "accept", "J/tok", "GPU%"]
    few = [_verified(16)]
    many = [_verified(99999, f"note {i}") for i in range(12)]  # wider counts, notes up to n12
    shown = [[c.header for c in table.default_columns(cells, candidates=table.columns(cells))]
             for cells in (few, many)]
    assert shown[0] == shown[1] and "J/tok" in shown[0] and "verify" in shown[0]
    columns = table.default_columns(few, candidates=table.columns(few))
    assert [c.text(few[0]) for c in columns if c.header == "J/tok"] == ["-"]  # a figure it lacks shows "-"


@pytest.mark.unit
def test_a_comparison_with_slo_power_and_long_names_fits_120_columns(tmp_path):
    from loadgen.report.compare import compare_table, load_inputs

    def cell(conc: int, out: float) -> dict:
        return {"context_tokens": 1024, "concurrency": conc, "status": "ok", "output_tok_s": out,
                "request_tok_s": {"mean": out / conc}, "ttft_s": {"p50": 0.02}, "accept_length": {"value": 3.9},
                "requests": {"ok": 64, "failed": 0, "by_outcome": {"ok": 64}},
                "power": {"mean_w_total": 5600.0, "j_per_output_token": 0.45},
                "slo": {"attainment": 0.93, "met": True, "good_output_tok_s": 0.9 * out}}
    paths = []
    for name in ("budget16_topk8_a_long_configuration", "budget32_topk8"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"schema": "loadgen.results/v1", "label": name,
                                    "cells": [cell(8, 4000.0), cell(64, 12000.0)]}))
        paths.append(str(path))
    text = compare_table(load_inputs(paths), baseline=None)
    assert _too_wide(text) == [], text
    assert all(h in text.splitlines()[0] for h in ("good tok/s", "SLO", "J/tok", "TTFT p50 ms"))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.unit
def test_a_sweep_status_line_is_redrawn_while_it_fits_and_said_whole_when_it_does_not(monkeypatch):
    from loadgen.sweep.ready import WaitProgress

    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    progress = WaitProgress("b16_t8", 60, "/nonexistent.log")
    progress(0.5, "connection refused")
    long_state = "up, waiting for the reconfiguration to finish; " + "loadgen-sim ready on http://127.0.0.1:30123 " * 3
    progress(1.0, long_state)
    progress(1.5, "ready")
    said = term.getvalue()
    assert said.startswith("\r  [b16_t8] waiting   0.5 s of 60 s: connection refused")
    lines = said.split("\n")
    assert all(len(line.rsplit("\r", 1)[-1]) <= WIDTH for line in lines)
    assert " ".join(w for line in lines for w in line.split()).count("loadgen-sim ready on") == 3  # whole
    assert lines[-1] == "" and lines[-2].rsplit("\r", 1)[-1].strip() == "[b16_t8] waiting   1.5 s of 60 s: ready"
