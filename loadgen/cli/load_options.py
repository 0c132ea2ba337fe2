"""The flags of how the load is made: open-loop arrivals (`--request-rate`, `--ramp`), the workload's shape
(`--dataset`, length laws, `--max-request-rate`, `--slot-ramp`) and the client that sends it (`--http-client`,
`--workers`, `--shard`, `--start-at`). Their own module because they describe the load, where `run_options`
holds the run's target, matrix and output; `open_loop_config`, `workload_config` and `parallel_config` check
them."""

from __future__ import annotations

import argparse

from loadgen.config import AUTO_STREAMS_PER_WORKER, SLOT_RAMP_AUTO_S, ParallelConfig, WorkloadConfig
from loadgen.names import ArrivalLaw, HttpClient, PrefixCache, values


def open_loop_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("open loop (requests arrive at a rate; replaces --concurrency)")
    g.add_argument("--request-rate", metavar="R[,R...]",
                   help="requests per second; a list makes one cell per rate per context")
    g.add_argument("--arrival", choices=values(ArrivalLaw),
                   help="arrival law: constant | poisson (default) | gamma (needs --burstiness)")
    g.add_argument("--burstiness", type=float, metavar="B",
                   help="gamma arrivals: CV² of the gaps = 1/B (B<1 burstier than Poisson, 1 = Poisson, >1 "
                        "more regular)")
    g.add_argument("--max-concurrency", type=int, metavar="N",
                   help="cap on requests in flight; a due request waits for a slot and counts as late")
    g.add_argument("--ramp", metavar="R0:R1:S",
                   help="raise the rate linearly from R0 to R1 req/s over S seconds and report the "
                        "sustainable rate (needs --slo-ttft-ms)")
    g.add_argument("--slo-ttft-ms", type=float, metavar="MS",
                   help="ramp: the TTFT p99 (from the intended send) the sustainable rate must meet")
    g.add_argument("--ramp-window", type=float, metavar="S",
                   help="ramp: sliding window of the TTFT p99 in seconds (default S/10)")


def workload_options(p: argparse.ArgumentParser) -> None:
    w = WorkloadConfig
    g = p.add_argument_group("workload (see docs/workloads.md)")
    g.add_argument("--dataset", metavar="FILE",
                   help="replay the rows of FILE as they are: OpenAI chat JSONL (messages), ShareGPT (JSON list or "
                        "JSONL of conversations) or prompt JSONL (prompt/text); rows may give max_tokens/output_len "
                        "and category. A cell is one concurrency (or rate) over the rows (--contexts not used)")
    g.add_argument("--category-field", default=w.category_field, metavar="NAME",
                   help="row field naming its category, for per-category figures (default %(default)s)")
    g.add_argument("--max-bad-rows", type=int, default=w.max_bad_rows, metavar="N",
                   help="unusable rows tolerated (each is named with file:line); more stops before any load "
                        "(default %(default)s)")
    g.add_argument("--prefix-cache", choices=values(PrefixCache), default=w.prefix_cache,
                   help="unique (default): every request starts with its own line, so no prefix cache serves it; "
                        "allow: dataset rows are sent unchanged (a radix cache may serve repeated prefixes)")
    g.add_argument("--context-dist", metavar="LAW:MEAN:WIDTH",
                   help="prompt lengths drawn per request instead of --contexts: normal:1024:128 (sd 128) or "
                        "uniform:1024:256 (±256)")
    g.add_argument("--output-dist", metavar="LAW:MEAN:WIDTH",
                   help="output lengths drawn per request instead of --max-tokens, e.g. normal:256:64")
    g.add_argument("--max-request-rate", type=float, metavar="R",
                   help="closed loop: start at most R requests in any 1 s window (a shared endpoint's rate limit); "
                        "the cell reports the achieved rate and the time spent throttled")
    g.add_argument("--slot-ramp", type=float, metavar="S", help="closed loop: start slot i of C at i·S/C s, so the "
                   f"first wave's prefills do not queue at once (default {SLOT_RAMP_AUTO_S:g} with --slo, else 0)")


def client_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("client")
    g.add_argument("--http-client", choices=values(HttpClient), default=ParallelConfig.http_client,
                   help="HTTP client of the measured streaming request: h1 (default; lean HTTP/1.1 on asyncio "
                        "protocols, see docs/performance.md) or aiohttp")
    g.add_argument("--workers", metavar="N|auto",  # None: 1 here, one per node with --ray
                   help="client processes for closed-loop cells (default 1: this one); auto = one per "
                        f"{AUTO_STREAMS_PER_WORKER} streams of the largest concurrency, at most cores − 1 (1 up to "
                        f"{AUTO_STREAMS_PER_WORKER} streams)")
    g.add_argument("--shard", metavar="i/N", help="run part i (from 0) of N of every closed-loop cell: slot s and "
                   "request j go to part s mod N and (j mod C) mod N; combine with `loadgen merge`")
    g.add_argument("--run-id", metavar="ID", help="run id (default: time + random); give shards one id")
    g.add_argument("--start-at", metavar="T", help="wait until Unix time T (or +S seconds) before the first cell")
    g.add_argument("--cell-period", type=float, metavar="S",
                   help="with --start-at: start cell k at T + k·S, so shards on several hosts stay aligned")
