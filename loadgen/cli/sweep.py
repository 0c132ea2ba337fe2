"""`loadgen sweep FILE.toml`: the subcommand's arguments, its dry run, and how the sweep builds each
configuration's run (the same parser and parts as a plain run)."""

from __future__ import annotations

import argparse
import asyncio
import os

from loadgen.aio import install_uvloop
from loadgen.cli.assemble import Shape, build_runner
from loadgen.cli.help_format import Parser
from loadgen.cli.run_config import config_from_args
from loadgen.cli.run_options import run_parser
from loadgen.cli.search import search_parser, search_run
from loadgen.config import RunConfig
from loadgen.console import wrap
from loadgen.errors import UsageError
from loadgen.results.document import ResultsFile
from loadgen.results.stored import ok_keys, stored_cells
from loadgen.run.interrupts import shell_lines
from loadgen.run.runner import CellCheck, Runner
from loadgen.sinks.base import Sink
from loadgen.sweep import state
from loadgen.sweep.runner import run_sweep
from loadgen.sweep.spec import SweepSpec, load_spec


def sweep_main(argv: list[str]) -> int:
    p = Parser(
        prog="loadgen sweep", formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        description="For each configuration of FILE.toml: run the reconfigure command, wait until the new "
                    "server is proven\nready, measure the matrix. Re-running resumes: finished cells are kept.",
        epilog="format and a worked example: docs/sweep.md")
    p.add_argument("file", metavar="FILE.toml", help="the sweep file")
    p.add_argument("--out-dir", metavar="DIR", help="results folder (default: the file's out_dir, else "
                   "results/<name>)")
    p.add_argument("--force", action="store_true", help="measure every cell again, ignoring stored results")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these configurations")
    p.add_argument("--dry-run", action="store_true", help="print what each configuration would run, and stop")
    a = p.parse_args(argv)
    spec = load_spec(a.file, a.out_dir)  # before the commands are rendered: {out_dir} is --out-dir's
    only = [n.strip() for n in a.only.split(",") if n.strip()] if a.only else None
    if a.dry_run:
        return dry_run(spec, only)
    make_out_dir(spec.out_dir)
    install_uvloop()
    return asyncio.run(run_sweep(spec, CommandLineRuns(spec.path, searched=bool(spec.search)), force=a.force,
                                 only=only))


def make_out_dir(out_dir: str) -> None:
    """The results folder with its missing parents, as `--out` creates its file's folders."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        why = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror
        raise UsageError(f"--out-dir {out_dir}: cannot create the folder ({why}); choose another folder") \
            from None


def dry_run(spec: SweepSpec, only: list[str] | None) -> int:
    print(f"sweep {spec.name}: results in {spec.out_dir}")
    for cfg in spec.configs:
        if only and cfg.name not in only:
            continue
        paths = state.paths(spec.out_dir, cfg.name)
        doc = state.load_doc(paths["results"])
        done = len(ok_keys(stored_cells(doc)))
        print(f"[{cfg.name}] params {cfg.params}")
        print("\n".join(shell_lines(cfg.reconfigure, "  reconfigure:")))  # a command stays pasteable
        if cfg.diagnostics:
            print("\n".join(shell_lines(cfg.diagnostics, "  diagnostics:")))
        print(wrap(f"  expect: {cfg.expect or '(none: readiness needs the server seen going away)'}"))
        run = ["loadgen", *(["search"] if spec.search else []), *spec.run_argv(cfg, paths["results"])]
        print("\n".join(shell_lines(run, f"  ready within {cfg.timeout_s:g} s; measure:")))
        print(f"  stored: {done} finished cells")
    return 0


class CommandLineRuns:
    """The sweep's `RunBuilder`: a configuration's run is parsed and built exactly as `loadgen ARGS` would
    (`loadgen search ARGS` when the sweep has a [search] table)."""

    def __init__(self, path: str = "the sweep file", searched: bool = False):
        self.path = path
        self.searched = searched
        self.shapes: dict[str | None, Shape] = {}  # a search's shape per configuration (its label)

    def config(self, argv: list[str]) -> RunConfig:
        try:
            args, unknown = (search_parser() if self.searched else run_parser()).parse_known_args(argv)
        except SystemExit:
            raise UsageError(f"{self.path} [matrix] args: rejected by the run options (see the message "
                             "above)") from None
        if unknown:
            raise UsageError(f"{self.path} [matrix] args: unknown option(s) {' '.join(unknown)}; "
                             "see loadgen --help")
        if self.searched:
            cfg, self.shapes[args.label] = search_run(args, run_parser().get_default("concurrency"))
        else:
            cfg = config_from_args(args)
        cfg.wait_ready_s = 0  # the sweep's own readiness gate has proven the server ready before each run
        return cfg

    def runner(self, cfg: RunConfig, url: str, *, sinks: list[Sink], results: ResultsFile,
               checks: list[CellCheck]) -> Runner:
        return build_runner(cfg, url, sinks=sinks, results=results, checks=checks, shape=self.shapes.get(cfg.label))
