"""The flags of sessions, shared prefixes, trace replay and cancellation (one group of `loadgen [run options]`;
checked in `loadgen.cli.replay_config`)."""

from __future__ import annotations

import argparse


def replay_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sessions, trace replay and cancellation (see docs/workloads.md)")
    g.add_argument("--sessions", action="store_true",
                   help="replay --dataset rows with several user turns as conversations: turn k+1 is sent after "
                        "turn k's answer (the server's own, in the history) and the think time; --concurrency "
                        "counts sessions, --requests-per-cell sessions per cell")
    g.add_argument("--think-time", type=float, metavar="S",
                   help="seconds between a turn's answer and the session's next turn (a row's think_time wins; "
                        "default 0)")
    g.add_argument("--trace", metavar="FILE",
                   help="send requests at the timestamps of FILE: Mooncake JSONL (timestamp ms, input_length, "
                        "output_length, hash_ids of 512-token blocks) or the same without hash_ids as JSONL or "
                        "CSV; exact prompt lengths, the given output lengths (open loop; --max-concurrency caps it)")
    g.add_argument("--trace-speed", metavar="X[,X...]",
                   help="replay the trace X times as fast (default 1); a list makes one cell per speed")
    g.add_argument("--shared-prefix", metavar="GROUPS:TOKENS",
                   help="synthetic prompts: request i opens with group (i mod GROUPS)'s shared text of exactly "
                        "TOKENS tokens, the rest of its --contexts length its own; each cell reports what a prefix "
                        "cache could serve and what it did")
    g.add_argument("--cancel-fraction", type=float, metavar="F",
                   help="close this share of the measured requests' streams on purpose (evenly spread, seeded); "
                        "counted apart as abandoned, never as failed (needs --cancel-after or "
                        "--cancel-after-tokens)")
    g.add_argument("--cancel-after", type=float, metavar="S",
                   help="close a chosen request's stream S seconds after it was sent")
    g.add_argument("--cancel-after-tokens", type=int, metavar="N",
                   help="close a chosen request's stream once N output tokens have arrived")
