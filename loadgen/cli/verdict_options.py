"""The flags that judge what the server answered: output verification (`--verify` and its reference) and
per-request latency targets (`--slo`, `--slo-attainment`). Their own module because each adds a verdict to a
cell rather than load; `run_config.verify_config` and `slo_config` check them."""

from __future__ import annotations

import argparse

from loadgen.config import DEFAULT_SLO_ATTAINMENT, VerifyConfig
from loadgen.names import SloMetric, VerifyMode, values


def verify_options(p: argparse.ArgumentParser) -> None:
    v = VerifyConfig()
    g = p.add_argument_group("output verification (see docs/verify.md)")
    g.add_argument("--verify", nargs="?", const=VerifyMode.GARBAGE.value, choices=values(VerifyMode),
                   help="send verification prompts (greedy, fixed max tokens) in every cell and compare their "
                        "outputs with a reference; a cell with garbage output fails; 'exact': any difference "
                        "from the reference fails it too")
    g.add_argument("--verify-prompts", metavar="FILE",
                   help="the verification prompts, one per line (text, or JSONL with 'prompt'/'text'); default: "
                        "8 built-in prompts")
    g.add_argument("--verify-max-tokens", type=int, default=v.max_tokens, metavar="N",
                   help="max tokens of every verification request (default %(default)s)")
    g.add_argument("--verify-reference", metavar="FILE",
                   help="compare with a reference saved by another run (--verify-save-reference) instead of "
                        "the prompts answered one at a time at this run's start")
    g.add_argument("--verify-save-reference", metavar="FILE", help="save the reference this run compares with")
    g.add_argument("--max-garbage-fraction", type=float, default=v.max_garbage_fraction, metavar="F",
                   help="a cell whose garbage outputs exceed F of its checked ones is failed (default %(default)g)")


def slo_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("latency targets and goodput (see docs/definitions.md#slo)")
    g.add_argument("--slo", metavar="METRIC=VALUE[,...]",
                   help="per-request latency targets; a request is good when it succeeded and met every one: "
                        f"{', '.join(values(SloMetric))} (itl: the request's p99 gap); values in ms or s, e.g. "
                        "--slo ttft=300ms,tpot=25ms,e2e=20s")
    g.add_argument("--slo-attainment", type=float, metavar="F",
                   help="the share of a cell's requests that must be good for the cell to meet the SLO "
                        f"(default {DEFAULT_SLO_ATTAINMENT:g})")
