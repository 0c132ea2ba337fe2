"""The flags of `loadgen [run options]`, one group per feature. Defaults come from the config dataclasses
(`loadgen.config`), so each is written once; `loadgen.cli.run_config` checks the values."""

from __future__ import annotations

import argparse

from loadgen.cli.checks import int_list_text
from loadgen.cli.help_format import Parser
from loadgen.cli.ray_options import ray_options
from loadgen.cli.replay_options import replay_options
from loadgen.cli.tls_options import tls_options
from loadgen.config import (
    AUTO_STREAMS_PER_WORKER,
    DEFAULT_SLO_ATTAINMENT,
    SLOT_RAMP_AUTO_S,
    ExporterConfig,
    FaultsConfig,
    ParallelConfig,
    RunConfig,
    TelemetryConfig,
    VerifyConfig,
    WorkloadConfig,
    default_drift_check,
)
from loadgen.names import ArrivalLaw, DriftCheck, HttpClient, PrefixCache, SloMetric, VerifyMode, values
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


def telemetry_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry (sampled during each cell, cut to its window)")
    g.add_argument("--server-metrics", default=TelemetryConfig.server_metrics, metavar="auto|off|URL",
                   help="server Prometheus /metrics for accept length and queue (default auto: the target's "
                        "/metrics if it answers)")
    g.add_argument("--accept-log-cmd", metavar="CMD",
                   help="command whose output carries SGLang 'Decode batch ... accept len: X' lines, e.g. "
                        "'journalctl -f -u sglang.service -o cat' (split like a shell, run without one)")
    g.add_argument("--dcgm", metavar="URL[,URL...]", help="dcgm-exporter /metrics URLs, one per node")
    g.add_argument("--nvml", action="store_true", help="read local GPU power through NVML (nvidia-ml-py)")
    g.add_argument("--telemetry-interval", type=float, default=TelemetryConfig.telemetry_interval_s, metavar="S",
                   help="sampling interval of every source in seconds (default %(default)g)")


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


def exporter_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live metrics (Prometheus; see docs/metrics.md and docs/observability.md)")
    g.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve live Prometheus metrics on http://HOST:PORT/metrics during the run (0 = a free "
                        "port, logged)")
    g.add_argument("--metrics-host", metavar="HOST",
                   help=f"address the metrics endpoint binds (default {ExporterConfig.metrics_host}; 0.0.0.0 for "
                        "all interfaces)")
    g.add_argument("--linger", type=float, metavar="S",
                   help=f"keep serving metrics S seconds after the run (default {ExporterConfig.metrics_linger_s:g}: "
                        "two 5 s scrape intervals)")



def power_limit_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("GPU power limit for the live metrics (see docs/observability.md)")
    g.add_argument("--gpu-power-limit", type=float, metavar="W",
                   help="power limit per GPU in W, exported as loadgen_gpu_power_limit_watts{source=\"flag\"} "
                        "for the power-vs-limit panels and alerts when dcgm-exporter does not export one (its "
                        "stock counters do not); default: the limit NVML or DCGM reported")

def trust_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("resuming, failed cells, a starting server (see README)")
    g.add_argument("--force", action="store_true",
                   help="replace an existing --out and its records; without it the same command resumes "
                        "(finished cells are kept) and other settings are refused")
    g.add_argument("--max-failed-fraction", type=float, default=D.max_failed_fraction, metavar="F",
                   help="a cell whose failed + cancelled requests exceed F of those scheduled is failed "
                        "(default %(default)g)")
    g.add_argument("--wait-ready", type=float, default=None, metavar="S",
                   help="wait up to S seconds for a server that is starting (503 loading, health up but "
                        f"generation failing, connection refused) before the first cell (default {D.wait_ready_s:g}, "
                        f"but a port refusing from the first try is given up after {D.wait_refused_s:g} s; "
                        "0 = fail at once)")


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
