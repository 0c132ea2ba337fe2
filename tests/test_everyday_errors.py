"""Everyday bad input, each as a user meets it: one line `loadgen: error: …` within 120 columns and exit 2, no
traceback and no long wait; output that survives a pipe closed early; and the small words that confused.

In this process (tier `unit`, the `cli` fixture): a file every file-taking flag names that this user cannot read
(mode 000; as root, whom mode 000 does not stop, `open` is made to answer what it answers to anyone else), a
folder, /proc/self/mem; the open-file limit, a mistyped sweep placeholder, a mistyped command, a negative SLO,
the settings of a run on the built-in simulator against a --url, the Ray flags without Ray, and the words under
the tables. Real processes and sockets (tier `sim`): a pipe closed before loadgen writes, `openssl s_server -www`
and a plain web server that answer 200 to everything, and a run's console lines."""

from __future__ import annotations

import builtins
import errno
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cells import typed
from tests.conftest import ROOT, CliResult, run_loadgen

WIDTH = 120
SCHEMA = "loadgen.results/v1"


def one_line_exit_2(res: CliResult | subprocess.CompletedProcess) -> str:
    """The error line of a bad input: exit 2, nothing on stdout, the error the last line said, every line within
    120 columns, no traceback. (Lines above it name details, as bad rows are.)"""
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert "Traceback" not in res.stderr and lines, res.stderr
    assert lines[-1].startswith("loadgen: error: ") and sum(ln.startswith("loadgen: error") for ln in lines) == 1
    assert all(len(line) <= WIDTH for line in lines), [len(line) for line in lines]
    return lines[-1].removeprefix("loadgen: error: ")


def results_file(path: Path, label: str = "r", cells: int = 2) -> Path:
    cell = {"status": "ok", "output_tok_s": 1000.0, "request_tok_s": {"mean": 100.0}, "ttft_s": {"p50": 0.02},
            "requests": {"ok": 16, "failed": 0, "by_outcome": {"ok": 16}}}
    path.write_text(json.dumps({"schema": SCHEMA, "label": label, "cells": [
        dict(cell, context_tokens=60, concurrency=2 ** i) for i in range(cells)]}))
    return path


# ---- a file that cannot be read, for every flag that takes one ---------------------------------------------
@pytest.fixture
def x000(tmp_path, monkeypatch) -> str:
    """`x000`, a file of mode 000 in the current folder (tmp_path). Root reads it all the same
    (CAP_DAC_OVERRIDE), so there `open` on it raises what it raises for any other user."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "x000"
    path.write_text('{"prompt": "hello"}\n')
    path.chmod(0)
    if os.access(path, os.R_OK):
        real = builtins.open

        def refusing(file, *args, **kwargs):
            if isinstance(file, str | os.PathLike) and os.path.abspath(file) == str(path):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(file))
            return real(file, *args, **kwargs)
        monkeypatch.setattr(builtins, "open", refusing)
    return "x000"


RUN = ["--url", "http://127.0.0.1:9", "--wait-ready", "0", "--out", "r.json"]
FILE_FLAGS = [  # (argv with FILE where the file goes, the words of the error)
    (["--prompts", "FILE"], "--prompts FILE: permission denied; give a JSONL or text file of prompts"),
    (["--dataset", "FILE"], "--dataset FILE: permission denied; give a JSONL or UTF-8 text file"),
    (["--trace", "FILE"], "--trace FILE: permission denied; give a JSONL or UTF-8 text file"),
    (["--api-key-file", "FILE"], "--api-key-file FILE: permission denied; give a file that holds the key"),
    (["--url", "https://127.0.0.1:9", "--ca-cert", "FILE"],
     "--ca-cert FILE: permission denied; give the PEM file of the server's CA"),
    (["--verify", "--verify-prompts", "FILE"],
     "--verify-prompts FILE: permission denied; give a text or JSONL file of prompts"),
    (["--verify", "--verify-reference", "FILE"],
     "--verify-reference FILE: permission denied; give a file written by --verify-save-reference"),
]
COMMAND_FILES = [  # subcommands: the whole argv
    (["sweep", "FILE"], "sweep file FILE: permission denied; give the path of a sweep TOML file"),
    (["tune", "FILE"], None),  # loadgen/tune's own words
    (["compare", "FILE"], "FILE: permission denied; give results JSON files (loadgen --out) or sweep folders"),
    (["compare", "ok.json", "FILE", "--format", "md"],
     "FILE: permission denied; give results JSON files (loadgen --out) or sweep folders"),
    (["report", "FILE", "--html", "r.html"],
     "FILE: permission denied; give results JSON files (loadgen --out) or sweep folders"),
    (["merge", "m.json", "FILE"], "FILE: permission denied; give the shards' results files (loadgen --out)"),
]


def _argv(argv: list[str], path: str) -> list[str]:
    return [path if a == "FILE" else a for a in argv]


@pytest.mark.unit
@pytest.mark.parametrize("argv,message", FILE_FLAGS, ids=[a[-2] for a, _ in FILE_FLAGS])
def test_an_unreadable_file_is_one_line_exit_2(argv, message, x000, cli):
    said = one_line_exit_2(cli(*RUN, *_argv(argv, x000)))
    assert said == message.replace("FILE", x000)
    assert not os.path.exists("r.requests.jsonl")


@pytest.mark.unit
@pytest.mark.parametrize("argv,message", COMMAND_FILES, ids=[" ".join(a) for a, _ in COMMAND_FILES])
def test_an_unreadable_file_given_to_a_subcommand_is_one_line_exit_2(argv, message, x000, cli, tmp_path):
    results_file(tmp_path / "ok.json")
    said = one_line_exit_2(cli(*_argv(argv, x000)))
    assert said == message.replace("FILE", x000) if message else x000 in said


@pytest.mark.unit
@pytest.mark.parametrize("argv,message", FILE_FLAGS, ids=[a[-2] for a, _ in FILE_FLAGS])
def test_a_folder_is_not_a_file(argv, message, tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    os.mkdir("d")
    said = one_line_exit_2(cli(*RUN, *_argv(argv, "d")))
    assert said == message.replace("FILE", "d").replace("permission denied", "is a folder, not a file")


@pytest.mark.unit
@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="no /proc/self/mem (not Linux)")
@pytest.mark.parametrize("argv,message", FILE_FLAGS, ids=[a[-2] for a, _ in FILE_FLAGS])
def test_a_file_that_fails_to_read_is_one_line_exit_2(argv, message, tmp_path, cli):
    # open() succeeds, read() fails with EIO: the first byte of a process's memory is not mapped
    said = one_line_exit_2(cli(*RUN, "--out", str(tmp_path / "r.json"), *_argv(argv, "/proc/self/mem")))
    assert said == message.replace("FILE", "/proc/self/mem").replace("permission denied", "input/output error")


@pytest.mark.sim
@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root, without setpriv to drop "
                    "the capability that reads any file")
def test_an_unreadable_prompts_file_in_a_real_process(tmp_path):
    """The same as a user meets it: `python -m loadgen --prompts x000` (as root, without CAP_DAC_OVERRIDE)."""
    (tmp_path / "x000").write_text("hello\n")
    (tmp_path / "x000").chmod(0)
    drop = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
            "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    res = subprocess.run([*drop, sys.executable, "-m", "loadgen", "--prompts", "x000", "--out", "r.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert one_line_exit_2(res) == "--prompts x000: permission denied; give a JSONL or text file of prompts"


OUTPUT_FLAGS = [  # every flag that names a file or folder to write, under a path whose folder is a file
    ["sim", "--truth", "F/t.jsonl"], ["sim", "--log-file", "F/l.log"], ["sim", "--pidfile", "F/p.pid"],
    ["sim", "--detach", "F/l.log"], ["report", "ok.json", "--plots", "F/p"], ["compare", "ok.json", "--out", "F/x.md"],
    ["compare", "ok.json", "--summary-out", "F/x.md"], ["merge", "F/m.json", "ok.json"], [*RUN[:4], "--out", "F/r.json"],
    [*RUN, "--verify", "--verify-save-reference", "F/x.json"],
]


@pytest.mark.unit
@pytest.mark.parametrize("argv", OUTPUT_FLAGS, ids=[" ".join(a[:1] + a[-2:]) for a in OUTPUT_FLAGS])
def test_a_file_that_cannot_be_written_is_one_line_exit_2(argv, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results_file(tmp_path / "ok.json")
    Path("F").write_text("a file, not a folder\n")
    said = one_line_exit_2(cli(*argv))
    assert said.endswith(("cannot create the folder F (is not a directory); choose another path",
                          "cannot create the folder F/p (is not a directory); choose another path")), said


# ---- a pipe closed early --------------------------------------------------------------------------------------
@pytest.mark.sim
@pytest.mark.parametrize("argv", [["report", "r.json", "--html", "r.html"], ["compare", "r.json", "r.json",
                                                                           "--format", "md"]],
                         ids=["report", "compare --format md"])
def test_a_pipe_closed_early_exits_quietly(argv, tmp_path):
    """`loadgen report … | head -2`: the reader is gone before loadgen writes (closed at once here, so that it is
    so whatever the output's size): no traceback, the exit status of a process SIGPIPE ended."""
    results_file(tmp_path / "r.json", cells=40)
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(60) == 128 + signal.SIGPIPE, err
    assert err == ""


# ---- a server that answers 200 with what is no OpenAI answer ---------------------------------------------------
HTML = b"<html><body>It works</body></html>"


class Answers200(BaseHTTPRequestHandler):
    """Every GET and POST gets 200 and a web page; with `models`, /v1/models is a real model list (so that only
    the generation is no OpenAI answer)."""

    models = False

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.models and self.path == "/v1/models":
            return self._send(json.dumps({"object": "list", "data": [{"id": "m"}]}).encode(), "application/json")
        self._send(HTML, "text/html")

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(HTML, "text/html")

    def log_message(self, *args) -> None:
        pass


class ModelsThenPages(Answers200):
    models = True


class NotFound(Answers200):
    """`python -m http.server`'s answer to loadgen: 404 everywhere (a web server loadgen has always told apart)."""

    def do_GET(self):  # noqa: N802
        self.send_error(404)


def serve(handler: type, tls: tuple[Path, Path] | None = None):
    import ssl

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def s_server(tmp_path: Path, cert: Path, key: Path):
    """`openssl s_server -www` on a free port: 200 and a status page to every GET, no answer to a POST."""
    port = free_port()
    proc = subprocess.Popen(["openssl", "s_server", "-www", "-accept", str(port), "-cert", str(cert), "-key",
                             str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.05)
    proc.kill()
    pytest.fail("openssl s_server did not listen")


@pytest.mark.sim
@pytest.mark.parametrize("kind", ["openssl s_server -www", "tls", "plain", "plain, --model", "models, then pages"])
def test_a_200_that_is_no_openai_answer_ends_within_10_s(kind, tmp_path):
    from tests.test_h1_tls import self_signed

    cert, key = self_signed(tmp_path)
    server = proc = None
    if kind.startswith("openssl"):
        if shutil.which("openssl") is None:
            pytest.skip("no openssl command")
        proc, port = s_server(tmp_path, cert, key)
    else:
        server, port = serve(ModelsThenPages if kind.startswith("models") else Answers200,
                             (cert, key) if kind == "tls" else None)
    tls = kind.startswith(("openssl", "tls"))
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    args = ["--url", url, "--out", str(tmp_path / "r.json"), *(["--ca-cert", str(cert)] if tls else []),
            *(["--model", "m"] if "--model" in kind else [])]
    try:
        t0 = time.monotonic()
        res = run_loadgen(*args, timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if server is not None:
            server.shutdown()
        if proc is not None:
            proc.kill()
            proc.wait(10)
    what = "no SSE answer" if kind.startswith("models") else "/v1/models: HTML"
    assert one_line_exit_2(res) == f"{url} does not look like an OpenAI-compatible server ({what}); check --url"
    # within 10 s (it waited 605 s for a generation that never came), or, on a machine so busy that a process
    # takes longer to start, within 5 s of the answer to a server of 404s, measured now
    reference = _seconds_to_refuse_404s(tmp_path)
    assert elapsed < max(10.0, reference + 5.0), (elapsed, reference)


def _seconds_to_refuse_404s(tmp_path: Path) -> float:
    server, port = serve(NotFound)
    try:
        t0 = time.monotonic()
        res = run_loadgen("--url", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "r404.json"), timeout=60)
        assert "(/v1/models: 404); check --url" in one_line_exit_2(res)
        return time.monotonic() - t0
    finally:
        server.shutdown()


# ---- widths ---------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_too_many_streams_for_the_open_file_limit(cli, monkeypatch, tmp_path):
    monkeypatch.setattr("loadgen.cli.parallel_config.raise_open_file_limit", lambda: (20000, 20000))
    said = one_line_exit_2(cli(*RUN, "--out", str(tmp_path / "r.json"), "--concurrency", "100000"))
    assert said == "--concurrency 100000: ulimit -n 20000 allows 19936 streams a process; use --workers 6 or raise it"


EXAMPLE = ROOT / "docs" / "examples" / "sim_budget_sweep.toml"


@pytest.mark.unit
@pytest.mark.parametrize("typo,fix", [("top_k", "did you mean {topk}?"), ("foo", "add foo = … to each configuration")])
def test_a_sweep_placeholder_without_a_value(typo, fix, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.toml").write_text(EXAMPLE.read_text().replace('"{topk}"', f'"{{{typo}}}"'))
    said = one_line_exit_2(cli("sweep", "bad.toml"))
    assert said == f"bad.toml b8_t4 [expect] speculative_eagle_topk: {{{typo}}} has no value; {fix}"


@pytest.mark.unit
def test_a_failed_configuration_in_the_sweep_summary_is_wrapped(tmp_path, capsys):
    from loadgen.results.schema import SWEEP_SCHEMA
    from loadgen.sweep.spec import load_spec
    from loadgen.sweep.summary import print_summary

    spec = load_spec(str(EXAMPLE), str(tmp_path))
    (tmp_path / "sweep.json").write_text(json.dumps({"schema": SWEEP_SCHEMA, "configs": []}))
    reason = ("not ready after 600 s; last state: generation 1/3 failed (timeout: idle timeout (30 s) after 0 "
              "chunks)")
    config = {"name": "b16_t8", "status": "failed", "reason": reason, "cells_ok": 0, "cells_total": 2,
              "garbage_cells": ["ctx 60 conc 8"]}
    print_summary(spec, {"configs": [config]})
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= WIDTH for line in out), out
    said = " ".join(line.strip() for line in out)
    assert f"b16_t8 failed 0/2 cells ok {reason}" in " ".join(said.split())  # wrapped, never cut


@pytest.mark.sim
def test_a_runs_console_lines_fit_and_its_id_is_not_in_the_prompts_line(tmp_path):
    res = run_loadgen("--concurrency", "1", "--contexts", "60", "--max-tokens", "8", "--requests-per-cell", "4",
                      "--warmup", "0", "--out", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert all(len(line) <= WIDTH for line in (res.stdout + res.stderr).splitlines())
    prompts = next(line for line in res.stderr.splitlines() if line.startswith("prompts:"))
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["run_id"] not in prompts and not prompts.endswith("; run")
    assert f"run {doc['run_id']}" in res.stderr  # the matrix's first line names it


# ---- words ----------------------------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("argv,said", [
    (["--slo", "ttft=-5ms"], "--slo ttft=-5ms: a target must be > 0, e.g. ttft=300ms"),
    (["--slo", "ttft=5"], "--slo ttft='5': give a duration with its unit, ms or s, e.g. ttft=300ms"),
    (["sweeep", "x.toml"], "unknown command 'sweeep'; did you mean loadgen sweep?"),
    (["reprot", "a.json"], "unknown command 'reprot'; did you mean loadgen report?"),
    (["benchmark"], "unknown command 'benchmark'; the commands are sim, sweep, tune, compare, report, merge, search"),
], ids=["slo negative", "slo no unit", "sweeep", "reprot", "benchmark"])
def test_words_of_small_mistakes(argv, said, cli, tmp_path):
    assert one_line_exit_2(cli(*argv, "--out", str(tmp_path / "r.json"))) == said


@pytest.mark.unit
def test_a_run_of_the_built_in_simulator_against_a_url_names_it(cli, tmp_path, monkeypatch):
    from loadgen.cli.run_config import config_from_args
    from loadgen.cli.run_options import run_parser

    monkeypatch.chdir(tmp_path)
    matrix = ["--concurrency", "1", "--contexts", "60", "--max-tokens", "8", "--out", "r.json"]
    args = config_from_args(run_parser().parse_args(matrix)).public_args()  # no --url: the built-in simulator
    cell = {"context_tokens": 60, "concurrency": 1, "status": "ok", "requests": {"ok": 4, "failed": 0}}
    Path("r.json").write_text(json.dumps({"schema": SCHEMA, "args": args, "cells": [cell]}))
    res = cli(*matrix, "--url", "http://127.0.0.1:9", "--wait-ready", "0")
    assert one_line_exit_2(res) == ("r.json was measured with other settings (named above); --force replaces it, "
                                    "another --out keeps both")
    assert "r.json: url: the built-in simulator → http://127.0.0.1:9" in res.stderr and "None" not in res.stderr


@pytest.mark.unit
def test_ray_flags_that_conflict_are_said_before_rays_absence(cli, monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    res = cli("--ray", "auto", "--workers", "2", "--workers-per-node", "2", "--out", str(tmp_path / "r.json"))
    assert one_line_exit_2(res) == "--workers 2 and --workers-per-node 2: give one of them"
    res = cli("--ray", "auto", "--out", str(tmp_path / "r.json"))
    assert one_line_exit_2(res) == "--ray needs Ray, which is not installed here: pip install 'loadgen[ray]'"


@pytest.mark.unit
def test_the_words_under_the_tables():
    from loadgen.record import CellKey
    from loadgen.report import table
    from loadgen.report.compare import legend
    from loadgen.report.compare_summary import verdict_text
    from loadgen.report.compare_terms import parse_fail_on
    from loadgen.report.regression_gate import GateResult, GateRow, Verdict
    from loadgen.verify.reference import reference_lines, reference_summary
    from tests.test_verify_relative import CLEAN, reference

    assert reference_lines(reference_summary(reference([CLEAN] * 8, [CLEAN] * 8))) == [
        "the server answered each of the 8 prompts the same twice alone: any divergence under load comes from the load"]
    row = {"slo": None, "noise": ["output_tok_s"], "best": [], "checks": [], "intervals": {}, "repeated": False,
           "context_tokens": 60, "concurrency": 1}
    tied = [line for line in legend([row], "*") if line.startswith("tied")]
    assert tied == ["tied: 1 of 1 compared figures: no leader beyond noise and 2%, so no best is named"]
    term = parse_fail_on("out_tok_s:-5%")[0]
    rows = [GateRow(CellKey(60, c), "b", term, Verdict.WITHIN_NOISE) for c in (1, 2)]
    assert verdict_text(GateResult([term], rows)) == \
        "no regression beyond noise (2 changes past their limits within noise)"
    assert verdict_text(GateResult([term], rows[:1])) == \
        "no regression beyond noise (1 change past its limit within noise)"
    gpu = typed({"context_tokens": 60, "concurrency": 1, "status": "ok", "bottleneck": "unknown",
                 "gpu_activity": {"total": {"utilization_percent": 60.0}}})
    assert table.row(gpu, [table.gpu_columns.DEFAULT_COLUMN]).strip() == "60 ?"
    assert "GPU%: busy % of the GPUs and what limited the cell (? = not told apart; docs/bottleneck.md)" in \
        table.footnote([gpu]).splitlines()
    assert "TTFT p50 ms" in table.header() and "TTFT p99 ms" in table.header()


@pytest.mark.unit
def test_an_slo_run_shows_goodput_beside_attainment():
    from loadgen.report import table

    cell = typed({"context_tokens": 60, "concurrency": 8, "status": "ok", "output_tok_s": 1000.0,
                  "slo": {"attainment": 0.93, "met": True, "good_output_tok_s": 900.0}})
    lines = table.table([cell]).splitlines()
    assert "SLO" in lines[0] and "good tok/s" in lines[0]
    assert lines[1].split()[-2:] == ["met", "900.0"]


@pytest.mark.unit
def test_the_example_sweeps_pidfile_and_log_follow_out_dir(tmp_path):
    from loadgen.sweep.spec import load_spec

    spec = load_spec(str(EXAMPLE), str(tmp_path / "elsewhere"))
    for cfg in spec.configs:
        assert f"{tmp_path}/elsewhere/sim.pid" in cfg.reconfigure and f"{tmp_path}/elsewhere/sim.log" in cfg.reconfigure
        assert cfg.diagnostics[-1] == f"{tmp_path}/elsewhere/sim.log"
    assert "results/sim-budget/sim.pid" in load_spec(str(EXAMPLE)).configs[0].reconfigure  # the file's own out_dir
