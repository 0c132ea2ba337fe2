"""The flags of what happens when a run goes wrong: the server going away mid-cell (`--on-server-down`), an
interrupt (`--drain-timeout`), a server still starting (`--wait-ready`), a cell with too many failures
(`--max-failed-fraction`) and a run resumed or replaced (`--force`). Their own module because they shape no
load: they say when a cell fails and what the run does next; `run_config.faults_config` checks them."""

from __future__ import annotations

import argparse

from loadgen.config import FaultsConfig, RunConfig


def server_down_options(p: argparse.ArgumentParser) -> None:
    f = FaultsConfig
    g = p.add_argument_group("server going away (see docs/faults.md)")
    g.add_argument("--on-server-down", default=f.on_server_down, metavar="stop|wait|skip",
                   help="when the server goes away mid-cell: stop the run (default), wait for it to come back and "
                        "measure the cell again, or skip to the next cell; the cell is failed in every case")
    g.add_argument("--server-down-after", type=int, default=f.server_down_after, metavar="N",
                   help="consecutive connection errors before checking whether the server is gone "
                        "(default %(default)s)")
    g.add_argument("--server-wait-timeout", type=float, default=f.server_wait_timeout_s, metavar="S",
                   help="with --on-server-down wait: seconds to wait for the server to come back "
                        "(default %(default)g)")
    g.add_argument("--cell-attempts", type=int, default=f.cell_attempts, metavar="N",
                   help="with --on-server-down wait: measure a cell at most N times (default %(default)s)")


def interrupt_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("interrupts")
    g.add_argument("--drain-timeout", type=float, default=FaultsConfig.drain_timeout_s, metavar="S",
                   help="after a first Ctrl-C/SIGTERM, let requests in flight finish for at most S seconds, then "
                        "cancel them (default %(default)g); a second Ctrl-C cancels them at once")


def trust_options(p: argparse.ArgumentParser) -> None:
    r = RunConfig
    g = p.add_argument_group("resuming, failed cells, a starting server (see README)")
    g.add_argument("--force", action="store_true",
                   help="replace an existing --out and its records; without it the same command resumes "
                        "(finished cells are kept) and other settings are refused")
    g.add_argument("--max-failed-fraction", type=float, default=r.max_failed_fraction, metavar="F",
                   help="a cell whose failed + cancelled requests exceed F of those scheduled is failed "
                        "(default %(default)g)")
    g.add_argument("--wait-ready", type=float, default=None, metavar="S",
                   help="wait up to S seconds for a server that is starting (503 loading, health up but "
                        f"generation failing, connection refused) before the first cell (default {r.wait_ready_s:g}, "
                        f"but a port refusing from the first try is given up after {r.wait_refused_s:g} s; "
                        "0 = fail at once)")
