"""Command line: `loadgen [run options]`, `loadgen sim`, and the other subcommands.

Every input is parsed here, at the edge; a bad one ends the program with a one-line message and exit 2
before any load is sent.
"""

from __future__ import annotations

import asyncio
import sys

from loadgen.aio import install_uvloop
from loadgen.cli.assemble import Shape, build_runner
from loadgen.cli.results_commands import compare_main, merge_main, report_main
from loadgen.cli.resume import Resume, nothing_left
from loadgen.cli.run_config import config_from_args
from loadgen.cli.run_options import run_parser
from loadgen.cli.search import search_main
from loadgen.cli.sim_options import sim_parser
from loadgen.cli.sweep import sweep_main
from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.sim.main import main as sim_run
from loadgen.sim.process import start_sim
from loadgen.sinks.base import Sink


def search_command(argv: list[str]) -> int:
    return search_main(argv, run_async)


SUBCOMMANDS = {"sweep": sweep_main, "compare": compare_main, "report": report_main, "merge": merge_main,
               "search": search_command}


async def run_async(cfg: RunConfig, extra_sinks: list[Sink] | None = None, shape: Shape | None = None) -> int:
    """One run of the matrix (or, with a `shape` that plans its cells, a search); without --url against the
    built-in simulator, started here and stopped after. `extra_sinks` come before the run's own (a test's
    probes)."""
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
        return await build_runner(cfg, url, sinks=[resume.sink], results=resume.results,
                                  extra_sinks=extra_sinks, shape=shape).run()
    finally:
        if sim is not None:
            await sim.stop()


def main(argv: list[str] | None = None, extra_sinks: list[Sink] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return SUBCOMMANDS[argv[0]](argv[1:])
        if argv and argv[0] == "sim":
            return sim_main(argv[1:])
        cfg = config_from_args(run_parser().parse_args(argv))
        install_uvloop()
        return asyncio.run(run_async(cfg, extra_sinks))
    except UsageError as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the run's own handlers are installed (starting up)
        print("loadgen: interrupted", file=sys.stderr)
        return 130


def sim_main(argv: list[str]) -> int:
    return sim_run(sim_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
