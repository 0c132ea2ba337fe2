"""`--ray ADDRESS` and `--workers-per-node K`: the cell's parts on the nodes of a Ray cluster
(docs/distributed.md), and the check of those flags (exit 2 before any load)."""

from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import replace

from loadgen.config import ParallelConfig
from loadgen.errors import UsageError

RAY_FIX = "pip install 'loadgen[ray]'"
_HOST_PORT = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


def ray_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray (the cell's parts on several hosts; docs/distributed.md)")
    g.add_argument("--ray", metavar="ADDRESS",
                   help="drive the --workers parts as Ray actors, one per node: auto (the cluster this host is in, "
                        "or $RAY_ADDRESS), host:port (its GCS) or ray://host:port (Ray Client)")
    g.add_argument("--workers-per-node", type=int, metavar="K",
                   help="with --ray: K parts on every node of the cluster (instead of --workers N on N nodes)")


def check_address(text: str) -> str:
    if text == "auto" or _HOST_PORT.match(text):
        return text
    raise UsageError(f"--ray {text!r}: give auto, host:port or ray://host:port (e.g. ray://head:10001)")


def ray_config(a: argparse.Namespace, par: ParallelConfig) -> ParallelConfig:
    """`par` with the Ray address and the parts' count checked: `--workers N` (N nodes) or `--workers-per-node
    K` (K on each node); neither, or `--workers auto`: one part per node."""
    per_node = a.workers_per_node
    if a.ray is None:
        if per_node is not None:
            raise UsageError("--workers-per-node needs --ray ADDRESS (on one host, use --workers N)")
        return par
    address = check_address(a.ray)
    # the flags first: a conflict between them is fixed now, Ray's absence by an install
    if par.shard:
        raise UsageError("--ray and --shard are two ways to use several hosts: choose one (docs/distributed.md)")
    if a.verify is not None:
        raise UsageError("--verify runs in one process: leave out --ray")
    explicit = a.workers not in (None, "auto")  # --workers 1 given: one part, on one node
    if per_node is not None and explicit:
        raise UsageError(f"--workers {a.workers} and --workers-per-node {per_node}: give one of them")
    if per_node is not None and per_node < 1:
        raise UsageError(f"--workers-per-node {per_node}: must be ≥ 1")
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--ray needs Ray, which is not installed here: {RAY_FIX}")
    if not explicit and per_node is None:
        per_node = 1
    return replace(par, ray_address=address, workers_per_node=per_node, workers=1 if per_node else par.workers)
