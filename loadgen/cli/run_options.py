"""The parser of `loadgen [run options]`, its groups in help order, and the flags of the run itself: the
target, the matrix, the output, repeats and the built-in simulator. The other groups live with their feature
(`load_options`, `observe_options`, `fault_options`, `verdict_options`, `replay_options`, `tls_options`,
`ray_options`). Defaults come from the config dataclasses (`loadgen.config`), so each is written once;
`loadgen.cli.run_config` checks the values."""

from __future__ import annotations

import argparse

from loadgen.cli.checks import int_list_text
from loadgen.cli.fault_options import interrupt_options, server_down_options, trust_options
from loadgen.cli.help_format import Parser
from loadgen.cli.load_options import client_options, open_loop_options, workload_options
from loadgen.cli.observe_options import exporter_options, power_limit_options, telemetry_options
from loadgen.cli.ray_options import ray_options
from loadgen.cli.replay_options import replay_options
from loadgen.cli.tls_options import tls_options
from loadgen.cli.verdict_options import slo_options, verify_options
from loadgen.config import RunConfig, default_drift_check
from loadgen.names import DriftCheck, values
from loadgen.sim.config import DEFAULT_BUDGET, DEFAULT_SPEED, DEFAULT_TOPK

D = RunConfig(url=None)
SIM_DEFAULTS = {"speed": DEFAULT_SPEED, "budget": DEFAULT_BUDGET, "topk": DEFAULT_TOPK}

EXAMPLES = """\
examples:
  loadgen --concurrency 1,32,64,128
      no --url: starts the built-in DDTree simulator on a free loopback port and measures it
  loadgen --url http://gpu-host:30000 --concurrency 1,32,64 --contexts 60,1024 --max-tokens 512 \\
          --label B300_b16t8 --out results/B300_b16t8.json
  loadgen --url http://gpu-host:30000 --api sglang-generate --duration-per-cell 60 --warmup 8
  loadgen sim --port 30000 --budget 16 --topk 8        serve the simulator
  loadgen sweep sweep.toml                              reconfigure, prove readiness, measure, resume
  loadgen search --slo ttft=300ms,tpot=25ms             the highest concurrency that meets the SLO
  loadgen compare a.json b.json                         compare runs cell by cell
  loadgen report results/my-sweep --plots plots/        the comparison as PNG plots
"""


def run_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="loadgen", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES, allow_abbrev=False,
        description="Measure an LLM server over a matrix of concurrency × prompt length\n"  # raw: within 120
                    "(subcommands: sim, sweep, search, compare, report, merge).")
    for add in (target_options, matrix_options, output_options, noise_options, sim_options, telemetry_options,
                open_loop_options, workload_options, replay_options, server_down_options, interrupt_options,
                tls_options, client_options, exporter_options, power_limit_options, trust_options, verify_options,
                slo_options, ray_options):
        add(p)
    return p


class NoKeyFlag(argparse.Action):
    """`--api-key` is refused without echoing its value: a key typed on the command line would show in `ps`
    and in shell history (and argparse would print it back as an unrecognized argument)."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("there is no --api-key flag (a key on the command line shows in ps and shell history); put "
                     "the key in the environment variable named by --api-key-env (default OPENAI_API_KEY) or in "
                     "--api-key-file")


def target_options(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("target")
    t.add_argument("--url", help="server base URL, e.g. http://gpu-host:30000 (default: built-in simulator)")
    t.add_argument("--api", default=D.api, help="openai-chat (default) | openai-completions | sglang-generate")
    t.add_argument("--model", help="model name (default: the first id from /v1/models)")
    t.add_argument("--api-key-env", default=D.api_key_env, metavar="VAR",
                   help="environment variable holding the API key (default %(default)s)")
    t.add_argument("--api-key-file", metavar="FILE", help="read the API key from this file instead")
    t.add_argument("--api-key", nargs="?", action=NoKeyFlag, help=argparse.SUPPRESS)


def matrix_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("matrix")
    m.add_argument("--concurrency", default=int_list_text(D.concurrency),
                   help="comma list of concurrencies (default %(default)s)")
    m.add_argument("--contexts", default=int_list_text(D.contexts),
                   help="comma list of prompt lengths in tokens (default %(default)s); N±P%% or N±D draws each "
                        "request's length uniformly around N (seeded, exact per request)")
    m.add_argument("--max-tokens", default=str(D.max_tokens),
                   help="output tokens per request (default %(default)s); N±P%% or N±D draws them per request")
    m.add_argument("--requests-per-cell", type=int, help="measured requests per cell (default max(16, 3×C))")
    m.add_argument("--duration-per-cell", type=float, metavar="S", help="send for S seconds per cell instead")
    m.add_argument("--warmup", type=int, default=D.warmup,
                   help="requests per cell sent first and excluded (default %(default)s)")
    m.add_argument("--prompts", metavar="FILE", help="JSONL (text/prompt/messages) or text file used as a text "
                   "source: cut into windows of exactly --contexts tokens (to replay rows as they are, use --dataset)")
    m.add_argument("--temperature", type=float, default=D.temperature,
                   help="sampling temperature (default %(default)g)")
    m.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=None,
                   help="make every request produce its max tokens (default: on for the synthetic matrix; with "
                        "--dataset on for rows that give a length, off for the others)")
    m.add_argument("--seed", type=int, default=D.seed, help="seed of prompt selection (default %(default)s)")
    m.add_argument("--timeout", type=float, default=D.timeout_s,
                   help="total seconds per request (default %(default)g)")
    m.add_argument("--idle-timeout", type=float, default=D.idle_timeout_s,
                   help="seconds without a byte before a stream counts as stalled (default %(default)g)")


def output_options(p: argparse.ArgumentParser) -> None:
    o = p.add_argument_group("output")
    o.add_argument("--label", help="name of this run in results and tables")
    o.add_argument("--out", help="results JSON path (default results/<label or time>.json); records go to "
                                 "<out>.requests.jsonl")


def noise_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("noise: repeats and the table (see docs/definitions.md#noise)")
    g.add_argument("--repeat", type=int, default=RunConfig.repeat, metavar="N",
                   help="measure each cell N times (default %(default)d): the key figures are the mean over "
                        "the N and their 95 %% interval Student's t across them; with 1, a bootstrap over "
                        "the requests")
    g.add_argument("--drift-check", choices=values(DriftCheck), default=default_drift_check(),
                   help="measure the first cell again after the last and say whether the server drifted (exit 1; "
                        "docs/drift.md): auto (when that cell is short; $LOADGEN_DRIFT_CHECK sets it), on, off")
    g.add_argument("--wide", action="store_true",
                   help="print every column of the matrix (the default table fits 120 characters)")


def sim_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("built-in simulator (without --url)")
    s.add_argument("--sim-speed", type=float, default=SIM_DEFAULTS["speed"],
                   help="simulator time compression (default %(default)g)")
    s.add_argument("--sim-budget", type=int, default=SIM_DEFAULTS["budget"],
                   help="simulated DDTree budget (default %(default)s)")
    s.add_argument("--sim-topk", type=int, default=SIM_DEFAULTS["topk"], help="simulated top-k (default %(default)s)")
