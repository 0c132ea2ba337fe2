"""The flags of `loadgen sim` (the simulator's server, its fault injection, its GPUs and log)."""

from __future__ import annotations

import argparse

from loadgen.cli.help_format import DefaultsShown, Parser
from loadgen.names import Engine, values
from loadgen.sim.config import DEFAULT_BUDGET, DEFAULT_SPEED, DEFAULT_TOPK


def _busy_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share of the time in (0, 1], e.g. 0.17")
    return value

def sim_parser() -> argparse.ArgumentParser:
    p = Parser(prog="loadgen sim", formatter_class=DefaultsShown, allow_abbrev=False,
                                description="Serve the built-in SGLang-compatible DDTree "
                                "simulator (OpenAI + /generate + /metrics + /server_info).")
    sim_options(p)
    return p


def sim_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=30000, help="port (0 = a free one; the ready line says which)")
    p.add_argument("--model", default="Kimi-K2.6-sim", help="served model name")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="DDTree draft budget (candidate tokens per step)")
    p.add_argument("--topk", type=int, default=DEFAULT_TOPK, help="DDTree top-k branching factor")
    p.add_argument("--block-size", type=int, default=16, help="drafter block size (accept length saturates here)")
    p.add_argument("--algorithm", default="DDTREE", help="speculative algorithm name reported in /server_info")
    p.add_argument("--speed", type=float, default=DEFAULT_SPEED,
                   help="time compression: every step S× faster, tok/s S× the modelled deployment's (1 = its "
                        "calibrated figures); the built-in simulator of a run starts alike")
    p.add_argument("--max-running", type=int, default=256, help="max running requests; the rest queue")
    p.add_argument("--context-length", type=int, default=32768, help="max model length (prompt + output)")
    p.add_argument("--seed", type=int, default=0, help="seed of the accept-length draws")
    p.add_argument("--truth", metavar="FILE", help="write one ground-truth JSONL line per request")
    p.add_argument("--api-key-env", metavar="VAR", help="require 'Authorization: Bearer $VAR' on API routes")
    p.add_argument("--disable-cuda-graph", action="store_true",
                   help="report disable_cuda_graph=true in /server_info (as SGLang started so); changes no timing")
    fault_options(p)
    output_fault_options(p)
    service_options(p)
    connection_options(p)
    per_token_options(p)
    workload_sim_options(p)
    p.add_argument("--engine", choices=values(Engine), default=Engine.SGLANG.value,
                   help="which server to imitate: sglang (default), vllm (metric names, /version) or llamacpp "
                        "(llama-server's stream shape, timings, prefix cache, /tokenize, llamacpp: metrics)")
    gpu_options(p)
    p.add_argument("--log-file", metavar="FILE",
                   help="append SGLang 'Decode batch ... accept len: X' lines to FILE ('-' = stdout); with "
                        "--engine llamacpp, llama-server's per-request 'draft acceptance ... mean len' lines")


def gpu_options(p: argparse.ArgumentParser) -> None:
    """The simulated GPUs behind a dcgm-exporter-compatible endpoint (docs/bottleneck.md, docs/power.md)."""
    p.add_argument("--dcgm-port", type=int, metavar="PORT",
                   help="also serve a dcgm-exporter-compatible /metrics on PORT (0 = a free one)")
    p.add_argument("--gpus", type=int, default=8, help="simulated GPUs behind the DCGM endpoint (default 8)")
    p.add_argument("--idle-w", type=float, default=120.0, help="simulated idle power per GPU in W (default 120)")
    p.add_argument("--load-w", type=float, default=450.0, help="simulated power per GPU at full load (default 450)")
    p.add_argument("--limit-w", type=float, default=1100.0, help="simulated power limit per GPU (default 1100)")
    p.add_argument("--gpu-busy-fraction", type=_busy_fraction, default=1.0, metavar="F",
                   help="the share of each step the GPUs compute, the rest being host work (default 1; 0.17: a "
                        "host-bound server); a load whose power passes --limit-w is held at the limit, throttled")
    p.add_argument("--dcgm-collect-ms", type=float, default=0.0, metavar="MS",
                   help="refresh the DCGM values every MS ms on a timer, as dcgm-exporter -c MS does "
                        "(default 0: fresh at every scrape)")
    p.add_argument("--dcgm-no-limit", action="store_true",
                   help="leave the power limit out of the DCGM endpoint, as dcgm-exporter's stock counters do")


def service_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("restarted per configuration by a sweep (see docs/sweep.md, sim/service.py)")
    g.add_argument("--pidfile", metavar="FILE",
                   help="stop the simulator FILE names (if it still runs), then write this one's pid there")
    g.add_argument("--detach", metavar="LOG",
                   help="run in the background, output in LOG; return once the server is ready (or failed)")
    g.add_argument("--exit-idle", type=float, default=0.0, metavar="S",
                   help="stop once no request has been served for S seconds (0 = never), so a sweep's last "
                        "simulator does not outlive it")


def fault_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fault injection (see docs/faults.md)")
    g.add_argument("--crash-after", type=int, metavar="N",
                   help="serve N generation requests, then die (SIGKILL) when the next one arrives")
    g.add_argument("--crash-above", type=int, metavar="M",
                   help="die when a generation request arrives while M are already running or waiting")
    g.add_argument("--slow-start", type=float, default=0.0, metavar="S",
                   help="for the first S seconds /health answers 200 but generation is broken (loading weights)")
    g.add_argument("--loading", type=float, default=0.0, metavar="S",
                   help="for the first S seconds every route answers 503 'Loading model' (weights loading)")
    g.add_argument("--stale-health", action="store_true",
                   help="/health answers 200 but generation is broken for good (a stale process)")
    g.add_argument("--broken-mode", choices=("fail", "hang"), default="fail",
                   help="how broken generation looks: fail = HTTP 503 at once (default), hang = never answers")
    g.add_argument("--stall-after", type=int, metavar="N",
                   help="stop sending a stream after N tokens, keeping the connection open")
    g.add_argument("--stall-every", type=int, default=1, metavar="K",
                   help="with --stall-after, only every K-th generation request stalls (default 1: all)")
    g.add_argument("--malformed-every", type=int, metavar="N",
                   help="insert an event that is not JSON before every N-th content chunk (counted server-wide)")
    g.add_argument("--http-error-rate", type=float, default=0.0, metavar="P",
                   help="answer a fraction P of generation requests with an HTTP error at once (seeded)")
    g.add_argument("--http-error-status", type=int, default=503, metavar="CODE",
                   help="status of those errors (default 503)")
    g.add_argument("--fault-seed", type=int, default=0, help="seed of the random faults (default 0)")


def workload_sim_options(p: argparse.ArgumentParser) -> None:
    """What the workload tests need of the server: reasoning deltas and a prefix cache that reports."""
    p.add_argument("--reasoning-tokens", type=int, default=0, metavar="N",
                   help="stream a chat answer's first N tokens as reasoning_content deltas (a reasoning model); "
                        "usage reports them as completion_tokens_details.reasoning_tokens")
    p.add_argument("--cache-report", action="store_true",
                   help="keep a prefix cache (16-token pages, as SGLang's radix cache serves shared prefixes) and "
                        "report each request's cached tokens (as SGLang --enable-cache-report); the engine "
                        "prefills only the uncached part")


def output_fault_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output faults (deterministic outputs per prompt; see docs/faults.md)")
    g.add_argument("--garbage-above", type=int, metavar="N",
                   help="a request's first token produced while more than N requests run starts a repetition "
                        "loop that lasts to the end of its output")
    g.add_argument("--drift-above", type=int, metavar="M",
                   help="with --drift-after K: the output diverges from its clean one at the first token at "
                        "position ≥ K produced while more than M requests run")
    g.add_argument("--drift-after", type=int, default=0, metavar="K",
                   help="first output position that may drift (default 0)")


def connection_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connections closed under the client (see docs/faults.md)")
    g.add_argument("--close-after-stream", action="store_true",
                   help="close the connection right after every streamed response, still announcing "
                        "'Keep-Alive: timeout=5, max=100' (as llama.cpp's llama-server does)")
    g.add_argument("--idle-close", type=float, metavar="S",
                   help="close keep-alive connections idle for S seconds (as proxies do)")
    g.add_argument("--close-lag", type=float, default=0.0, metavar="S",
                   help="the FIN of a connection the server closes leaves S seconds after it stopped serving it; "
                        "requests arriving in between are dropped (truth outcome dropped_by_close)")


def per_token_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per-token-events", action="store_true",
                   help="stream each step's tokens as separate one-token SSE events, back to back (as "
                        "llama.cpp's llama-server does); the truth keeps one entry per step")
