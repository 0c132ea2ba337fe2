"""The client's processes to a checked `ParallelConfig`: `--workers` (a number, or auto, sized against the
open-file limit), `--shard i/N` with the `--start-at`/`--cell-period` that keep shards aligned, `--run-id`
and `--http-client`. Its own module because it is the one check that reads the machine (cores, the
open-file limit) and the parallel package (`auto_workers`, `open_files`)."""

from __future__ import annotations

import argparse

from loadgen.cli.checks import parse_start_at, parse_workers
from loadgen.config import ParallelConfig, RunConfig
from loadgen.errors import UsageError
from loadgen.names import HttpClient
from loadgen.parallel.open_files import check_open_files, raise_open_file_limit, workers_needed
from loadgen.parallel.workers import auto_workers


def parallel_config(a: argparse.Namespace, cfg: RunConfig) -> ParallelConfig:
    workers = worker_count(a.workers or str(ParallelConfig.workers), cfg)
    shard = parse_shard(a.shard) if a.shard else None
    if shard and cfg.open_loop.enabled:
        raise UsageError("--shard splits closed-loop cells only; open-loop rates are not split across shards yet")
    if a.run_id is not None and (not a.run_id or any(c in a.run_id for c in "/\\ \n\t")):
        raise UsageError(f"--run-id {a.run_id!r}: no spaces or slashes")
    start_at = parse_start_at(a.start_at) if a.start_at else None
    if a.cell_period is not None and (a.cell_period <= 0 or start_at is None):
        raise UsageError("--cell-period S needs S > 0 and --start-at")
    if shard and shard[1] > 1:
        # shards share no coordinator: only the wall clock keeps them on the same cell at the same time
        if start_at is None:
            raise UsageError("--shard i/N with N > 1 needs --start-at T (the same T for every shard), so that "
                             "all shards start loading the server together")
        if len(cfg.contexts) * len(cfg.concurrency) > 1 and a.cell_period is None:
            raise UsageError("--shard with more than one cell needs --cell-period S (longer than the longest "
                             "cell, e.g. --duration-per-cell + the longest request), so shards start cell k "
                             "together")
    return ParallelConfig(http_client=HttpClient(a.http_client), workers=workers, shard=shard, run_id=a.run_id,
                          start_at=start_at, cell_period_s=a.cell_period)


def worker_count(text: str, cfg: RunConfig) -> int:
    """`--workers` as a number (auto: `auto_workers`, and at least as many as the open-file limit needs),
    after the open-file limit was raised and checked against the streams of the busiest process."""
    workers = parse_workers(text)
    limit = raise_open_file_limit()
    if isinstance(workers, str):  # "auto"
        workers = auto_workers(max(cfg.concurrency))
        if limit is not None:
            workers = max(workers, workers_needed(max(cfg.concurrency), limit[0]))
    if limit is not None and not cfg.open_loop.enabled:
        check_open_files(max(cfg.concurrency), workers, *limit)
    elif limit is not None and cfg.open_loop.max_concurrency:  # open-loop cells run in this process
        check_open_files(cfg.open_loop.max_concurrency, 1, *limit)
    return workers


def parse_shard(text: str) -> tuple[int, int]:
    """'2/8' → (2, 8): part 2 of 8, counted from 0 (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)."""
    try:
        i_s, n_s = text.split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise UsageError(f"--shard {text!r}: give i/N, e.g. 0/4 (i counts from 0)") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard {text!r}: need N ≥ 1 and 0 ≤ i < N")
    return i, n
