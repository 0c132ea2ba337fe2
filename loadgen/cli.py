"""Command line: `loadgen [run options]`, `loadgen sim`, and the other subcommands.

Every input is parsed here, at the edge; a bad one ends the program with a one-line message and exit 2
before any load is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import datetime

from loadgen.config import RunConfig, check_api, check_out_path, check_url, parse_int_list, positive
from loadgen.errors import UsageError

EXAMPLES = """\
examples:
  loadgen --concurrency 1,32,64,128
      no --url: starts the built-in DDTree simulator on a free loopback port and measures it
  loadgen --url http://gpu-host:30000 --concurrency 1,32,64 --contexts 60,1024 --max-tokens 512 \\
          --label B300_b16t8 --out results/B300_b16t8.json
  loadgen --url http://gpu-host:30000 --api sglang-generate --duration-per-cell 60 --warmup 8
  loadgen sim --port 30000 --budget 16 --topk 8        serve the simulator
  loadgen sweep sweep.toml                              reconfigure, prove readiness, measure, resume
  loadgen compare a.json b.json                         compare runs cell by cell
  loadgen report results/my-sweep --plots plots/        the comparison as PNG plots
"""

SUBCOMMANDS = {}


def subcommand(name: str):
    def register(fn):
        SUBCOMMANDS[name] = fn
        return fn
    return register


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loadgen", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description="Measure an LLM server over a matrix of concurrency × prompt length "
                    "(subcommands: sim, sweep, compare, report, merge).")
    t = p.add_argument_group("target")
    t.add_argument("--url", help="server base URL, e.g. http://gpu-host:30000 (default: built-in simulator)")
    t.add_argument("--api", default="openai-chat",
                   help="openai-chat (default) | openai-completions | sglang-generate")
    t.add_argument("--model", help="model name (default: the first id from /v1/models)")
    t.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY)")
    t.add_argument("--api-key-file", metavar="FILE", help="read the API key from this file instead")
    m = p.add_argument_group("matrix")
    m.add_argument("--concurrency", default="1,32,64,128", help="comma list of concurrencies (default 1,32,64,128)")
    m.add_argument("--contexts", default="60,1024", help="comma list of prompt lengths in tokens (default 60,1024)")
    m.add_argument("--max-tokens", type=int, default=512, help="output tokens per request (default 512)")
    m.add_argument("--requests-per-cell", type=int, help="measured requests per cell (default max(16, 2×C))")
    m.add_argument("--duration-per-cell", type=float, metavar="S", help="send for S seconds per cell instead")
    m.add_argument("--warmup", type=int, default=0, help="requests per cell sent first and excluded (default 0)")
    m.add_argument("--prompts", metavar="FILE", help="JSONL (text/prompt/messages) or text file of prompts")
    m.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    m.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                   help="make every request produce --max-tokens (default on)")
    m.add_argument("--seed", type=int, default=0, help="seed of prompt selection (default 0)")
    m.add_argument("--timeout", type=float, default=600.0, help="total seconds per request (default 600)")
    m.add_argument("--idle-timeout", type=float, default=120.0,
                   help="seconds without a byte before a stream counts as stalled (default 120)")
    o = p.add_argument_group("output")
    o.add_argument("--label", help="name of this run in results and tables")
    o.add_argument("--out", help="results JSON path (default results/<label or time>.json); records go to "
                                 "<out>.requests.jsonl")
    s = p.add_argument_group("built-in simulator (without --url)")
    s.add_argument("--sim-speed", type=float, default=4.0, help="simulator time compression (default 4)")
    s.add_argument("--sim-budget", type=int, default=8, help="simulated DDTree budget (default 8)")
    s.add_argument("--sim-topk", type=int, default=4, help="simulated top-k (default 4)")
    for register in OPTION_GROUPS:
        register(p)
    return p


OPTION_GROUPS: list = []  # plug-ins add their flags here (telemetry, exporter, open loop, faults)
CONFIGURERS: list = []  # and read them back into RunConfig.extras


def config_from_args(a: argparse.Namespace) -> RunConfig:
    url = check_url(a.url) if a.url else None
    cfg = RunConfig(
        url=url, api=check_api(a.api), model=a.model,
        concurrency=parse_int_list("--concurrency", a.concurrency),
        contexts=parse_int_list("--contexts", a.contexts),
        max_tokens=positive("--max-tokens", a.max_tokens),
        requests_per_cell=positive("--requests-per-cell", a.requests_per_cell),
        duration_per_cell_s=positive("--duration-per-cell", a.duration_per_cell),
        warmup=positive("--warmup", a.warmup, allow_zero=True),
        label=a.label, seed=a.seed, timeout_s=positive("--timeout", a.timeout),
        idle_timeout_s=positive("--idle-timeout", a.idle_timeout), api_key_env=a.api_key_env,
        api_key_file=a.api_key_file, prompts_file=a.prompts, temperature=a.temperature, ignore_eos=a.ignore_eos,
        sim_args=["--speed", str(a.sim_speed), "--budget", str(a.sim_budget), "--topk", str(a.sim_topk)],
    )
    if a.prompts and not os.path.isfile(a.prompts):
        raise UsageError(f"--prompts {a.prompts}: no such file; give a JSONL or text file of prompts")
    if a.out:
        cfg.out = check_out_path(a.out)
    else:
        os.makedirs("results", exist_ok=True)
        name = a.label or datetime.now().strftime("loadgen-%Y%m%d-%H%M%S")
        cfg.out = os.path.join("results", f"{name}.json")
    for configure in CONFIGURERS:
        configure(a, cfg)
    return cfg


def make_sinks(cfg: RunConfig) -> list:
    from loadgen.sinks.jsonl import JsonlSink, requests_path
    return [JsonlSink(requests_path(cfg.out))]


async def run_async(cfg: RunConfig) -> int:
    from loadgen.runner import Runner, log
    from loadgen.simproc import start_sim

    sim = None
    url = cfg.url
    if url is None:
        sim = await start_sim(cfg.sim_args)
        url = sim.url
        log(f"no --url given: started the built-in simulator at {url} ({sim.banner.split('(', 1)[-1].rstrip(')')})")
    try:
        sinks = make_sinks(cfg)
        runner = Runner(cfg, url, sinks, cfg.out)
        for hook in RUNNER_HOOKS:
            hook(runner)
        return await runner.run()
    finally:
        if sim is not None:
            await sim.stop()


RUNNER_HOOKS: list = []  # plug-ins that adapt the runner (signals, exporter lifetime, open loop)


PLUGINS = ("loadgen.telemetry.options", "loadgen.telemetry.accept_length", "loadgen.openloop",
           "loadgen.sweep.cli", "loadgen.compare", "loadgen.report", "loadgen.server_down", "loadgen.interrupts",
           "loadgen.h1send", "loadgen.workers", "loadgen.shard", "loadgen.merge", "exporters.live_cli")


def load_plugins() -> None:
    import importlib
    for name in PLUGINS:
        importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    load_plugins()
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return SUBCOMMANDS[argv[0]](argv[1:])
        if argv and argv[0] == "sim":
            return sim_main(argv[1:])
        args = run_parser().parse_args(argv)
        cfg = config_from_args(args)
        _install_uvloop()
        return asyncio.run(run_async(cfg))
    except UsageError as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the run's own handlers are installed (starting up)
        print("loadgen: interrupted", file=sys.stderr)
        return 130


def sim_main(argv: list[str]) -> int:
    from loadgen.sim.main import add_arguments
    from loadgen.sim.main import main as sim_run
    p = argparse.ArgumentParser(prog="loadgen sim", description="Serve the built-in SGLang-compatible DDTree "
                                "simulator (OpenAI + /generate + /metrics + /server_info).")
    add_arguments(p)
    return sim_run(p.parse_args(argv))


def _install_uvloop() -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass


if __name__ == "__main__":
    sys.exit(main())
