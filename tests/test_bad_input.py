"""Every bad input: exit code 2, one line on stderr naming the problem and the fix, and no load sent (the
simulator's truth log, which gets a row for every generation request, stays empty). The CLI runs in this
process (`conftest.cli`); two tests run it as real processes, `python -m loadgen` and the installed
`loadgen` script, for their exit status."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT, CliResult, said_lines, start_sim

KEY = "sk-test-7f3a9c1e5b"
KEY_VARIABLES = ("OPENAI_API_KEY", "MY_KEY")
NO_KEY_ENV = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}


def loadgen_process(*args: str, program: tuple[str, ...] = (sys.executable, "-m", "loadgen")):
    return subprocess.run([*program, *args], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=NO_KEY_ENV)


@pytest.fixture
def loadgen(cli):
    """The CLI in this process, without an API key in the environment unless `env` gives one."""
    return lambda *args, env=None: cli(*args, env=env, unset=KEY_VARIABLES)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    h = start_sim(tmp_path_factory.mktemp("sim"), "--speed", "8", "--context-length", "2048")
    yield h
    h.stop()


@pytest.fixture(scope="module")
def keyed_sim(tmp_path_factory):
    h = start_sim(tmp_path_factory.mktemp("keyed"), "--speed", "8", "--api-key-env", "SIM_KEY",
                  env={"SIM_KEY": KEY})
    yield h
    h.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expect_usage_error(proc: CliResult | subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"loadgen: error: {message}"]
    assert proc.stdout == ""


# ---- checked before anything starts --------------------------------------------------------------------------
OFFLINE = [
    (["--concurrency", "1,,3"], "--concurrency: empty item in '1,,3'; give comma-separated integers like 1,32,64"),
    (["--concurrency", "0"], "--concurrency: 0 is below 1; every value must be ≥ 1"),
    (["--concurrency", "-2"], "--concurrency: -2 is below 1; every value must be ≥ 1"),
    (["--concurrency", "8,4,8"], "--concurrency: 8 appears twice in '8,4,8'; give each value once"),
    (["--contexts", "60,1k"], "--contexts: '1k' is not an integer; give prompt lengths like 60,1024 or ranges like "
                              "1024±25%"),
    (["--contexts", ""], "--contexts: empty item in ''; give prompt lengths like 60,1024 or ranges like 1024±25%"),
    (["--api", "openai"], ("--api 'openai' is unknown; choose one of openai-chat, openai-completions, "
                          "sglang-generate")),
    (["--url", "gpu-host:30000"], "--url 'gpu-host:30000' needs a scheme and host, e.g. http://gpu-host:30000"),
    (["--url", "http://"], "--url 'http://' needs a scheme and host, e.g. http://gpu-host:30000"),
    (["--url", "http://gpu-host:port"], ("--url 'http://gpu-host:port': the port must be a number from 1 to "
                                        "65535, e.g. http://gpu-host:30000")),
    (["--url", "http://gpu-host:30000/v1"], ("--url 'http://gpu-host:30000/v1' ends in /v1; give the server's root "
                                            "(http://gpu-host:30000), loadgen adds the API path")),
    (["--url", "http://admin:hunter2@gpu-host:30000"],
     ("--url must not carry credentials (user:password@host); put the API key in the environment variable named "
     "by --api-key-env (default OPENAI_API_KEY) or in --api-key-file")),
    (["--max-tokens", "0"], "--max-tokens: 0 must be > 0"),
    (["--requests-per-cell", "-5"], "--requests-per-cell: -5 must be > 0"),
    (["--timeout", "nan"], "--timeout: nan is not a finite number; give a number > 0"),
    (["--idle-timeout", "0"], "--idle-timeout: 0.0 must be > 0"),
    (["--on-server-down", "retry"], "--on-server-down 'retry' is unknown; choose one of stop, wait, skip"),
    (["--server-down-after", "0"], "--server-down-after 0 must be ≥ 1, e.g. 3"),
    (["--drain-timeout", "-1"], "--drain-timeout -1 must be ≥ 0 seconds, e.g. 30"),
    (["--prompts", "/nonexistent/prompts.jsonl"],
     "--prompts /nonexistent/prompts.jsonl: no such file; give a JSONL or text file of prompts"),
    (["--out", "/proc/no-such-folder/r.json"], ("--out /proc/no-such-folder/r.json: cannot create the folder "
                                                "/proc/no-such-folder (No such file or directory); choose another "
                                                "path")),
    (["--out", "/etc/hostname/r.json"],
     "--out /etc/hostname/r.json: cannot create the folder /etc/hostname (is not a directory); choose another path"),
    (["--out", "/proc/r.json"], ("--out /proc/r.json: cannot write in /proc (No such file or directory); choose "
                                "another path")),
    (["--out", "/tmp"], "--out /tmp is a directory; give a file name, e.g. /tmp/run.json"),
]


@pytest.mark.unit
@pytest.mark.parametrize("args,message", OFFLINE, ids=[" ".join(a) for a, _ in OFFLINE])
def test_offline_checks(args, message, tmp_path, loadgen):
    # these errors come before any connection is tried (--url's port 9 is never reached)
    base = ["--url", "http://127.0.0.1:9", "--out", str(tmp_path / "r.json"), "--wait-ready", "0"]
    proc = loadgen(*base, *args)
    expect_usage_error(proc, message)
    assert not (tmp_path / "r.requests.jsonl").exists()


@pytest.mark.sim
@pytest.mark.skipif(shutil.which("loadgen") is None, reason="the loadgen script is not installed (pip install -e .)")
def test_the_installed_script_exits_2_with_one_line(tmp_path):
    proc = loadgen_process("--concurrency", "0", "--out", str(tmp_path / "r.json"), program=(shutil.which("loadgen"),))
    expect_usage_error(proc, "--concurrency: 0 is below 1; every value must be ≥ 1")


# ---- checked against the server, before any generation --------------------------------------------------------
@pytest.mark.sim
def test_unreachable_url(tmp_path):
    port = closed_port()
    # a real `python -m loadgen` process: its exit status is 2, as main()'s return value says in-process
    # --wait-ready 0: without it, a refused connection is a server not up yet, waited for (test_wait_ready.py)
    proc = loadgen_process("--url", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "r.json"), "--wait-ready", "0")
    expect_usage_error(proc, f"cannot reach http://127.0.0.1:{port}: connection refused: nothing listens on "
                             f"127.0.0.1:{port}; check --url's port and that the server is running")


def against(loadgen, sim, tmp_path, *args: str, env: dict | None = None) -> CliResult:
    proc = loadgen("--url", sim.url, "--out", str(tmp_path / "r.json"), "--contexts", "60", "--max-tokens", "16",
                   *args, env=env)
    # no load reached the server: only the readiness gate's 1-token generations (--wait-ready)
    assert all(r["rid"].startswith("readiness-") and r["max_tokens"] == 1 for r in sim.truth_rows())
    return proc


@pytest.mark.sim
def test_model_not_served(sim, tmp_path, loadgen):
    expect_usage_error(against(loadgen, sim, tmp_path, "--model", "llama-3-70b"),
                       f"model 'llama-3-70b' is not served by {sim.url}; it serves: Kimi-K2.6-sim")


@pytest.mark.sim
def test_context_longer_than_the_server_allows(sim, tmp_path, loadgen):
    expect_usage_error(against(loadgen, sim, tmp_path, "--contexts", "60,2040,4096"),
                       "--contexts 2040,4096 + --max-tokens 16 exceed the server's max model length 2048; use "
                       "shorter contexts or fewer --max-tokens")


@pytest.mark.sim
@pytest.mark.parametrize("content", [b"", b'{"note": "no text here"}\n[1, 2]\nnot json\n', b"\n\n  \n"],
                         ids=["empty", "no-usable-rows", "blank"])
def test_prompts_without_usable_rows(content, sim, tmp_path, loadgen):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(content)
    proc = against(loadgen, sim, tmp_path, "--prompts", str(path))
    bad = [f"{path}:1: no prompt field (expected text, prompt or messages)", f"{path}:2: not a JSON object",
           f"{path}:3: invalid JSON (invalid literal, expected 'null')"] if content.startswith(b"{") else []
    named = f", {len(bad)} bad ones named above" if bad else ""
    assert proc.returncode == 2 and proc.stdout == ""
    assert said_lines(proc.stderr) == [*bad, f"loadgen: error: --prompts {path}: no usable rows{named} (expected "
                                              "JSONL with a 'text', 'prompt' or 'messages' field, or plain text "
                                              "paragraphs)"]


@pytest.mark.sim
def test_no_key_for_a_server_that_wants_one(keyed_sim, tmp_path, loadgen):
    expect_usage_error(against(loadgen, keyed_sim, tmp_path),
                       f"{keyed_sim.url} answered 401 (unauthorised) and no API key was sent: put the key in the "
                       "environment variable OPENAI_API_KEY (or name another with --api-key-env, or use "
                       "--api-key-file)")


@pytest.mark.sim
def test_wrong_key_names_where_it_came_from(keyed_sim, tmp_path, loadgen):
    wrong = "sk-wrong-0000"
    proc = against(loadgen, keyed_sim, tmp_path, env={"OPENAI_API_KEY": wrong})
    expect_usage_error(proc, f"{keyed_sim.url} answered 401 (unauthorised) to the API key from the environment "
                             "variable OPENAI_API_KEY; check that it is this server's key")
    proc = against(loadgen, keyed_sim, tmp_path, "--api-key-env", "MY_KEY", env={"MY_KEY": wrong})
    expect_usage_error(proc, f"{keyed_sim.url} answered 401 (unauthorised) to the API key from the environment "
                             "variable MY_KEY; check that it is this server's key")
    key_file = tmp_path / "key.txt"
    key_file.write_text(wrong + "\n")
    proc = against(loadgen, keyed_sim, tmp_path, "--api-key-file", str(key_file))
    expect_usage_error(proc, f"{keyed_sim.url} answered 401 (unauthorised) to the API key from the file "
                             f"{key_file} (--api-key-file); check that it is this server's key")
    assert wrong not in proc.stderr


@pytest.mark.sim
def test_key_file_problems(keyed_sim, tmp_path, loadgen):
    missing = tmp_path / "missing.txt"
    expect_usage_error(against(loadgen, keyed_sim, tmp_path, "--api-key-file", str(missing)),
                       f"--api-key-file {missing}: no such file; give a file that holds the key")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    expect_usage_error(against(loadgen, keyed_sim, tmp_path, "--api-key-file", str(empty)),
                       f"--api-key-file {empty} must hold the key on one line (it holds nothing)")
