"""Command line: `loadgen [run options]`, `loadgen sim`, and the other subcommands.

Every input is parsed here, at the edge; a bad one ends the program with a one-line message and exit 2
before any load is sent. The parts of a run (aiohttp, numpy, the exporter, the simulator) are imported only
once the command line has been read, so `--help` and a mistyped flag answer at once (a test keeps it so).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from typing import TYPE_CHECKING

from loadgen.errors import UsageError

if TYPE_CHECKING:
    from loadgen.cli.assemble import Shape
    from loadgen.config import RunConfig
    from loadgen.sinks.base import Sink

SUBCOMMANDS = ("sweep", "tune", "compare", "report", "merge", "search")
COMMANDS = ("sim", *SUBCOMMANDS)


async def run_async(cfg: RunConfig, extra_sinks: list[Sink] | None = None, shape: Shape | None = None,
                    argv: list[str] | None = None) -> int:
    """One run of the matrix (or, with a `shape` that plans its cells, a search); without --url against the
    built-in simulator, started here and stopped after. `extra_sinks` come before the run's own (a test's
    probes); `argv`, the run's arguments, make the command an interrupt names to resume it."""
    from loadgen.cli.assemble import build_runner
    from loadgen.cli.resume import Resume, nothing_left, resume_command
    from loadgen.console import log
    from loadgen.sim.process import start_sim

    searched = shape is not None and shape.plan is not None
    resume = Resume(cfg, searched=searched)  # before the simulator starts: a refused --out costs nothing
    if not resume.remaining and not searched:
        return nothing_left(resume)
    sim = None
    url = cfg.url
    if url is None:
        sim = await start_sim(cfg.sim_args)
        url = sim.url
        log(f"no --url given: started the built-in simulator at {url} ({sim.banner.split('(', 1)[-1].rstrip(')')})")
    try:
        again = resume_command(argv, cfg) if argv is not None else None
        return await build_runner(cfg, url, sinks=[resume.sink], results=resume.results,
                                  extra_sinks=extra_sinks, shape=shape, resume_command=again).run()
    finally:
        if sim is not None:
            await sim.stop()


def subcommand(name: str):
    """The main function of subcommand `name`, imported when it is called."""
    if name == "sweep":
        from loadgen.cli.sweep import sweep_main
        return sweep_main
    if name == "tune":
        from loadgen.cli.tune import tune_main
        return tune_main
    if name == "search":
        from loadgen.cli.search import search_main
        return lambda argv: search_main(argv, run_async)
    from loadgen.cli import results_commands
    return getattr(results_commands, f"{name}_main")


def run_main(argv: list[str], extra_sinks: list[Sink] | None) -> int:
    from loadgen.cli.run_options import run_parser

    args = run_parser().parse_args(argv)  # --help and a bad flag end here, before the run's parts are imported
    import asyncio

    from loadgen.aio import install_uvloop
    from loadgen.cli.run_config import config_from_args

    cfg = config_from_args(args)
    install_uvloop()
    return asyncio.run(run_async(cfg, extra_sinks, argv=argv))


def command(argv: list[str], extra_sinks: list[Sink] | None) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        return subcommand(argv[0])(argv[1:])
    if argv and argv[0] == "sim":
        return sim_main(argv[1:])
    if argv and not argv[0].startswith("-"):  # a run takes no word of its own: a command, mistyped
        raise unknown_command(argv[0])
    return run_main(argv, extra_sinks)


def main(argv: list[str] | None = None, extra_sinks: list[Sink] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        code = command(argv, extra_sinks)
        sys.stdout.flush()  # here, not at exit: a reader gone before the last block is a BrokenPipeError below
        return code
    except UsageError as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the run's own handlers are installed (starting up)
        print("loadgen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not stdout_is_a_pipe():
            raise  # a socket's, not the reader of our output: a bug to see
        return stdout_gone()


def unknown_command(word: str) -> UsageError:
    import difflib

    close = difflib.get_close_matches(word, COMMANDS, 1)
    fix = f"did you mean loadgen {close[0]}?" if close else f"the commands are {', '.join(COMMANDS)}"
    return UsageError(f"unknown command {word!r}; {fix}")


def stdout_is_a_pipe() -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode)
    except (OSError, ValueError):  # no file behind it (a test's capture)
        return False


def stdout_gone() -> int:
    """The reader of stdout went away (`loadgen report … | head -2`): nothing more can be said there, and
    Python's flush at exit must not fail again, so stdout becomes /dev/null. The exit status is that of a
    process SIGPIPE ended (141), as `cat` gets in the same pipe, without a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def sim_main(argv: list[str]) -> int:
    from loadgen.cli.sim_options import sim_parser

    args = sim_parser().parse_args(argv)
    from loadgen.cli.checks import check_out_path

    for flag in ("--truth", "--log-file", "--pidfile", "--detach"):  # files it writes: exit 2 now, not a traceback
        path = getattr(args, flag[2:].replace("-", "_"), None)
        if path and path != "-":  # --log-file - is stdout
            check_out_path(path, flag)
    from loadgen.sim.main import main as sim_run

    return sim_run(args, argv)
