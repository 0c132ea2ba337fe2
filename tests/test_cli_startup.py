"""The command line answers at once: `--help` and a mistyped flag import none of the run's heavy parts, and a
mistyped flag is answered in at most three lines that name the flag meant.

Which modules `--help` imports is checked twice. The unit test reads the source: the module-level imports
reachable from `loadgen.cli.main` and the parsers (`--help` runs nothing else before argparse exits); an
in-process look at `sys.modules` cannot work there, because the test process has long imported numpy and
aiohttp for other tests. The sim-tier test is the ground truth: a fresh interpreter runs `--help` and
prints the `sys.modules` it ended with.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from loadgen.cli.help_format import closest_option, suggestion
from tests.conftest import ROOT

HEAVY = ("numpy", "aiohttp", "matplotlib", "orjson", "uvloop", "prometheus_client", "asyncio", "multiprocessing")
ENTRY = ("loadgen.cli.main", "loadgen.cli.run_options", "loadgen.cli.sim_options", "loadgen.cli.help_format")


def _module_path(name: str):
    base = ROOT / name.replace(".", "/")
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _top_level_imports(name: str) -> set[str]:
    """The modules `name` imports when it is imported: its module-level statements (not function bodies, not
    `if TYPE_CHECKING:`), with each loadgen module's packages."""
    tree = ast.parse(_module_path(name).read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _module_path(f"{node.module}.{a.name}").exists()}
    return found | {".".join(n.split(".")[:i]) for n in found for i in range(1, n.count(".") + 1)}


def import_closure(roots: tuple[str, ...]) -> set[str]:
    seen: set[str] = set()
    todo = [*roots, *(".".join(r.split(".")[:i]) for r in roots for i in range(1, r.count(".") + 1))]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name.split(".")[0] == "loadgen" and _module_path(name).exists():
            todo += _top_level_imports(name)
    return seen


@pytest.mark.unit
def test_help_reaches_none_of_the_heavy_modules_at_import_time():
    reached = import_closure(ENTRY)
    assert "loadgen.config" in reached and "loadgen.names" in reached  # the walk follows loadgen's imports
    assert sorted(m for m in reached if m.split(".")[0] in HEAVY) == []


@pytest.mark.sim
def test_help_in_a_fresh_interpreter_imports_none_of_the_heavy_modules():
    code = ("import sys, io, contextlib\nfrom loadgen.cli.main import main\n"
            "for argv in (['--help'], ['sim', '--help'], ['--concurent', '4']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "        try:\n            main(argv)\n        except SystemExit:\n            pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in sys.argv[1:])))")
    run = subprocess.run([sys.executable, "-c", code, *HEAVY], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ""


@pytest.mark.unit
def test_a_mistyped_flag_is_answered_in_three_lines_naming_the_flag_meant(cli):
    run = cli("--concurent", "4")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) <= 3, run.stderr
    assert lines[0] == "loadgen: error: unrecognized arguments: --concurent 4; did you mean --concurrency?"
    assert "usage:" not in run.stderr and "--help" in run.stderr
    sim = cli("sim", "--spee", "8").stderr
    assert "did you mean --speed?" in sim and len(sim.strip().splitlines()) <= 3


@pytest.mark.unit
@pytest.mark.parametrize("word,meant", [
    ("--concurent", "--concurrency"), ("--concurent=4", "--concurrency"), ("--max-token", "--max-tokens"),
    ("--concurrency", None), ("--zzzzzz", None), ("4", None),
])
def test_closest_option(word, meant):
    assert closest_option(word, ["--concurrency", "--contexts", "--max-tokens", "-h"]) == meant


@pytest.mark.unit
def test_suggestion_names_each_mistyped_option_and_only_unrecognized_arguments():
    options = ["--concurrency", "--contexts"]
    assert suggestion("unrecognized arguments: --concurent 4 --contxts 60", options) == \
        "; did you mean --concurrency (for --concurent)?; did you mean --contexts (for --contxts)?"
    assert suggestion("argument --concurrency: expected one argument", options) == ""
