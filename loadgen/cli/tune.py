"""`loadgen tune FILE.toml`: the subcommand's arguments, its dry run, and how each visit's run is built (the same
parser and parts as a plain run, its cells the visit's plan)."""

from __future__ import annotations

import argparse
import asyncio

from loadgen.aio import install_uvloop
from loadgen.cli.assemble import Shape, build_runner
from loadgen.cli.help_format import Parser
from loadgen.cli.sweep import CommandLineRuns, make_out_dir
from loadgen.config import RunConfig
from loadgen.console import WIDTH, wrap
from loadgen.report.tune_text import tune_lines
from loadgen.results.document import ResultsFile
from loadgen.results.verdict import Load
from loadgen.run.interrupts import shell_lines
from loadgen.run.runner import CellCheck, Runner
from loadgen.sinks.base import Sink
from loadgen.tune.decide import part_requests, parts_most, visit_order
from loadgen.tune.plan import VisitPlan
from loadgen.tune.runner import full_requests, run_tune
from loadgen.tune.spec import TuneSpec, load_tune_spec


def tune_main(argv: list[str]) -> int:
    p = Parser(
        prog="loadgen tune", formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        description="The best configuration of FILE.toml at each load of its [matrix], measured where the answer "
                    "is still open:\neach configuration visited once in parts that stop when it is beyond noise "
                    "worse, the ties measured again\nat the end. Re-running resumes: finished visits and parts "
                    "are kept.",
        epilog="format, the strategy and a worked example: docs/tune.md")
    p.add_argument("file", metavar="FILE.toml", help="the tune file: a sweep file with a [tune] table")
    p.add_argument("--out-dir", metavar="DIR", help="results folder (default: the file's out_dir, else "
                   "results/<name>, with -tune added)")
    p.add_argument("--dry-run", action="store_true", help="print what each configuration would run, and stop")
    a = p.parse_args(argv)
    spec = load_tune_spec(a.file, a.out_dir)
    if a.dry_run:
        return dry_run(spec)
    make_out_dir(spec.out_dir)
    install_uvloop()
    return asyncio.run(tune_and_say(spec))


async def tune_and_say(spec: TuneSpec) -> int:
    found = await run_tune(spec, lambda plan: TuneRuns(spec.path, plan))
    print()
    print("\n".join(tune_lines(found.answers, found.doc, WIDTH)))
    print(f"results: {found.path}")
    return found.code


def dry_run(spec: TuneSpec) -> int:
    runs = CommandLineRuns(spec.path)
    t = spec.tune
    print(f"tune {spec.name}: objective {t.objective}, resolution {t.resolution:.0%}, results in {spec.out_dir}")
    budget = ", ".join(f"{k} {v:g}" for k, v in (("max_cells", t.max_cells), ("max_gpu_minutes", t.max_gpu_minutes))
                       if v is not None) or "none"
    print(f"budget: {budget}; rounds of the open ties at the end: {t.rounds}")
    cfg0 = runs.config(spec.run_argv(spec.configs[0], "dry-run.json"))
    for key in cfg0.cells():
        load = Load.of(key)
        full = full_requests(cfg0.size, load)
        part = part_requests(full, load.concurrency, t.first_part)
        print(f"load ctx={load.context_tokens} {load.text()}: parts of {part} requests, at most "
              f"{parts_most(full, part)} a visit (requests_per_cell {full})")
    order = [spec.configs[i] for i in visit_order(len(spec.configs))]
    print(wrap("first visits, in this order (the first is the control): " + ", ".join(c.name for c in order)))
    for cfg in order:
        print(f"[{cfg.name}] params {cfg.params}")
        print("\n".join(shell_lines(cfg.reconfigure, "  reconfigure:")))
        if cfg.diagnostics:
            print("\n".join(shell_lines(cfg.diagnostics, "  diagnostics:")))
        runs.config(spec.run_argv(cfg, f"{cfg.name}.json"))  # every configuration's run validates now
    return 0


class TuneRuns:
    """A visit's `RunBuilder`: a configuration's run parsed and built exactly as `loadgen ARGS` would be (the
    sweep's), its cells and their sizes the visit's plan (None: the matrix)."""

    def __init__(self, path: str, plan: VisitPlan | None):
        self.inner, self.plan = CommandLineRuns(path), plan

    def config(self, argv: list[str]) -> RunConfig:
        return self.inner.config(argv)

    def runner(self, cfg: RunConfig, url: str, *, sinks: list[Sink], results: ResultsFile,
               checks: list[CellCheck]) -> Runner:
        if self.plan is None:
            return self.inner.runner(cfg, url, sinks=sinks, results=results, checks=checks)
        return build_runner(cfg, url, sinks=sinks, results=results, checks=checks,
                            shape=Shape(plan=self.plan, checks=[self.plan], parts=self.plan.requests,
                                        tune_watch=self.plan.watch))
