"""`loadgen search --slo … [run options]`: the highest concurrency (or, with `--over rate`, request rate) whose
cell meets the SLO, found with real cells (docs/search.md). The run options are those of a plain run; the
search chooses the load itself, so `--concurrency` and `--request-rate` are not given."""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from loadgen.cli.run_options import run_parser
from loadgen.config import RunConfig
from loadgen.errors import UsageError
from loadgen.names import SearchOver, values
from loadgen.search.probes import SearchConfig

if TYPE_CHECKING:
    from loadgen.cli.assemble import Shape
    from loadgen.results.cell_result import CellResult

D = SearchConfig()
LIMITS = {SearchOver.CONCURRENCY: 1024.0, SearchOver.RATE: 1000.0}


def search_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("search (see docs/search.md)")
    g.add_argument("--over", choices=values(SearchOver), default=D.over,
                   help="what the search raises: concurrency (closed loop, default) or rate (open loop, req/s)")
    g.add_argument("--start", type=float, metavar="X", help="the first probe's load (default 1)")
    g.add_argument("--growth", type=float, default=D.growth, metavar="G",
                   help="each probe × G until one misses the SLO (default %(default)g), then bisection")
    g.add_argument("--max", type=float, metavar="X", dest="limit",
                   help="the highest load probed (default 1024 concurrency, 1000 req/s)")
    g.add_argument("--resolution", default="10%", metavar="N|P%",
                   help="bisect until the bracket is no wider than N (or P%% of its met end; default %(default)s)")
    g.add_argument("--max-cells", type=int, default=D.max_cells, metavar="N",
                   help="cells per prompt length, at most, every measurement counted (default %(default)s)")
    g.add_argument("--probe-min-requests", type=int, default=D.min_requests, metavar="N",
                   help="measured requests a probe needs before it is decided or stopped early (default %(default)s)")
    g.add_argument("--probe-min-seconds", type=float, default=D.min_s, metavar="S",
                   help="seconds of measured window a probe needs before it is decided (default %(default)g)")
    g.add_argument("--probe-max-requests", type=int, default=D.max_requests, metavar="N",
                   help="requests a probe is extended to at most while its attainment is not decided "
                        "(default 0: 4× its first part)")
    g.add_argument("--drift-every", default="end", metavar="N|end",
                   help="measure the control probe (the first probe) again at the end (default: end) and also "
                        "after every N probes; 0: never")


def search_parser() -> argparse.ArgumentParser:
    p = run_parser()
    p.prog = "loadgen search"
    p.description = ("The highest load whose cell meets the SLO (--slo): raise it from --start, × --growth a "
                     "probe, until a cell\nmisses, then bisect to --resolution. Every probe is a normal cell of "
                     "--out; the same command again resumes.")
    p.epilog = ("example:\n  loadgen search --url http://gpu-host:30000 --slo ttft=300ms,tpot=25ms --contexts 1024 "
                "--out results/capacity.json")
    search_options(p)
    return p


def parse_resolution(text: str) -> tuple[float, bool]:
    """'10%' → (0.1, relative); '4' → (4, absolute)."""
    relative = text.strip().endswith("%")
    try:
        value = float(text.strip().rstrip("%")) / (100 if relative else 1)
    except ValueError:
        raise UsageError(f"--resolution {text!r}: give a number (e.g. 2) or a percentage (e.g. 10%)") from None
    if not (value > 0 and math.isfinite(value)) or (relative and value >= 1):
        raise UsageError(f"--resolution {text!r}: must be > 0 (a percentage below 100%), e.g. 10%")
    return value, relative


def search_config(a: argparse.Namespace) -> SearchConfig:
    over = SearchOver(a.over)
    start = 1.0 if a.start is None else a.start
    limit = LIMITS[over] if a.limit is None else a.limit
    integral = over == SearchOver.CONCURRENCY
    if not (start > 0 and math.isfinite(start)) or (integral and start != int(start)):
        raise UsageError(f"--start {a.start:g}: give a {'whole number ≥ 1' if integral else 'rate > 0'}, e.g. 4")
    if not (limit >= start and math.isfinite(limit)):
        raise UsageError(f"--max {limit:g}: must be ≥ --start {start:g}")
    if not a.growth > 1:
        raise UsageError(f"--growth {a.growth:g}: must be > 1, e.g. 4 (×4 a probe) or 2")
    if a.max_cells < 2:
        raise UsageError(f"--max-cells {a.max_cells}: a search needs at least 2 cells (a met and a missed one)")
    check, every = parse_drift_every(a.drift_every)
    probe_checks(a, check)
    resolution, relative = parse_resolution(a.resolution)
    return SearchConfig(over=over, start=int(start) if integral else start, growth=a.growth,
                        limit=int(limit) if integral else limit, resolution=resolution, relative=relative,
                        max_cells=a.max_cells, min_requests=a.probe_min_requests, min_s=a.probe_min_seconds,
                        max_requests=a.probe_max_requests, drift_check=check, drift_every=every)


def parse_drift_every(text: str) -> tuple[bool, int]:
    """--drift-every: 'end' → (True, 0): the control probe measured again at the end only; 'N' → (True, N): also
    after every N probes; '0' → (False, 0): never."""
    if text.strip() == "end":
        return True, 0
    try:
        every = int(text)
    except ValueError:
        every = -1
    if every < 0:
        raise UsageError(f"--drift-every {text!r}: give end (the control probe measured again at the end), a "
                         "number N ≥ 1 (also after every N probes) or 0 (never)")
    return every > 0, every


def probe_checks(a: argparse.Namespace, drift_check: bool) -> None:
    from loadgen.metrics.drift import MIN_WINDOW_S  # numpy, once the command line has been read

    if a.probe_min_requests < 1:
        raise UsageError(f"--probe-min-requests {a.probe_min_requests}: must be ≥ 1, e.g. 40")
    if not (a.probe_min_seconds >= 0 and math.isfinite(a.probe_min_seconds)):
        raise UsageError(f"--probe-min-seconds {a.probe_min_seconds:g}: must be ≥ 0, e.g. 10")
    if a.probe_max_requests and a.probe_max_requests < a.probe_min_requests:
        raise UsageError(f"--probe-max-requests {a.probe_max_requests}: must be ≥ --probe-min-requests "
                         f"{a.probe_min_requests} (or 0: 4× a probe's first part)")
    if drift_check and a.probe_min_seconds < MIN_WINDOW_S:
        raise UsageError(f"--probe-min-seconds {a.probe_min_seconds:g}: the control probe needs ≥ {MIN_WINDOW_S:g} s "
                         "to be judged for drift; give more, or --drift-every 0")


def search_run(a: argparse.Namespace, default_concurrency: str) -> tuple[RunConfig, Shape]:
    """The run of a search: its configuration (the first probe's load as the matrix) and its shape."""
    from loadgen.cli.assemble import Shape  # the run's parts, once the command line has been read
    from loadgen.cli.run_config import config_from_args
    from loadgen.run.early_stop import OversaturationStop
    from loadgen.search.plan import SearchPlan
    from loadgen.search.text import search_text

    if a.slo is None:
        raise UsageError("loadgen search needs latency targets: add --slo, e.g. --slo ttft=300ms,tpot=25ms")
    if a.concurrency != default_concurrency or a.request_rate is not None or a.ramp is not None:
        raise UsageError("loadgen search chooses the load itself: drop --concurrency/--request-rate/--ramp and "
                         "use --over, --start and --max")
    search = search_config(a)
    if search.over == SearchOver.RATE:
        a.request_rate = f"{search.start:g}"
    else:
        if a.max_concurrency is not None:
            raise UsageError("--max-concurrency caps an open loop's requests in flight; add --over rate, or drop it")
        a.concurrency = str(search.start)
    cfg = config_from_args(a)
    cap = cfg.open_loop.max_concurrency or 0
    early = OversaturationStop(cfg.slo, search.min_requests, search.min_s)
    plan = SearchPlan(search, cfg.slo, cfg.contexts, cap, early)

    def answer(cells: list[CellResult]) -> str:
        return search_text(search, cfg.slo, cfg.contexts, cells, cap)
    return cfg, Shape(plan=plan, early_stops=[early], tables=[answer], checks=[plan], sized=plan.requests,
                      watch=plan.watch)


def search_main(argv: list[str], run: Callable[..., Coroutine[Any, Any, int]]) -> int:
    """`loadgen search ARGS`, measured by `run` (the plain run's entry, `cli.main.run_async`)."""
    args = search_parser().parse_args(argv)  # --help and a bad flag end here, before the run's parts are imported
    from loadgen.aio import install_uvloop

    cfg, shape = search_run(args, run_parser().get_default("concurrency"))
    install_uvloop()
    return asyncio.run(run(cfg, shape=shape, argv=["search", *argv]))  # an interrupt names the command to resume
