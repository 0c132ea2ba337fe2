"""Small things a new user meets: a negative temperature, a server that is not an LLM server, abbreviated
long options, help texts that show defaults and agree with the README. The CLI runs in this process
(`conftest.cli`), except against a real web server."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from loadgen.cli.run_options import run_parser
from loadgen.cli.sim_options import sim_parser
from tests.conftest import ROOT, run_loadgen
from tests.test_resume import free_port


@pytest.mark.unit
def test_a_negative_temperature_is_refused(tmp_path, cli):
    run = cli("--temperature", "-1", "--out", str(tmp_path / "r.json"))
    assert run.returncode == 2
    assert run.stderr == ("loadgen: error: --temperature -1: must be a finite number ≥ 0 (0 = greedy), e.g. 0 "
                          "or 0.7\n")


@pytest.mark.sim
def test_a_server_that_is_not_an_llm_server_is_named_so(tmp_path):
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                            "--directory", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:  # until it listens
            run = run_loadgen("--url", url, "--concurrency", "1", "--out", str(tmp_path / "r.json"))
            if "connection refused" not in run.stderr or time.monotonic() > deadline:
                break
    finally:
        web.terminate()
        web.wait(10)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        f"loadgen: error: {url} does not look like an OpenAI-compatible server (/v1/models: 404); check --url")


@pytest.mark.unit
@pytest.mark.parametrize("argv,abbreviated", [
    (("--conc", "1"), "--conc 1"),
    (("sim", "--spee", "8"), "--spee 8"),
    (("sweep", "x.toml", "--forc"), "--forc"),
    (("compare", "a.json", "b.json", "--form", "md"), "--form md"),
    (("report", "a.json", "--htm", "r.html"), "--htm r.html"),
], ids=["run", "sim", "sweep", "compare", "report"])
def test_abbreviated_long_options_are_errors(argv, abbreviated, cli):
    run = cli(*argv)
    assert run.returncode == 2 and f"unrecognized arguments: {abbreviated}" in run.stderr, run.stderr


@pytest.mark.unit
def test_the_nvml_exporter_takes_no_abbreviation_either(capsys):
    from exporters.nvml import main
    with pytest.raises(SystemExit) as exc:
        main(["--por", "9401"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unrecognized arguments: --por 9401" in err, err


@pytest.mark.unit
def test_sim_help_shows_every_default():
    text = " ".join(sim_parser().format_help().split())
    for flag, default in (("--speed", "4.0"), ("--budget", "8"), ("--max-running", "256"), ("--port", "30000"),
                          ("--http-error-status", "503"), ("--slow-start", "0.0"), ("--loading", "0.0")):
        entry = text.split(f" {flag} ", 1)[1].split(" --", 1)[0]  # the option's own help, after the usage
        assert "(default " + default + ")" in entry, (flag, entry)
    assert "(default 120) (default" not in text  # a help that says its default says it once


@pytest.mark.unit
def test_workers_auto_is_described_alike_in_help_and_readme():
    helptext = " ".join(run_parser().format_help().split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "auto = one per 256 streams of the largest concurrency, at most cores − 1" in helptext
    assert "auto: one per 256 streams, up to cores − 1" in readme
