"""`loadgen sim`: run the simulator as a server (its own process)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from typing import TYPE_CHECKING

from aiohttp import web

from loadgen.aio import install_uvloop
from loadgen.names import Engine as EngineName
from loadgen.sim import faults, service
from loadgen.sim.arrival import stamp_arrivals
from loadgen.sim.config import SimConfig
from loadgen.sim.connections import closer_from_args
from loadgen.sim.engine import Engine
from loadgen.sim.gpus import SimulatedGpus
from loadgen.sim.logs import DecodeLog
from loadgen.sim.model import Roofline, SpecConfig
from loadgen.sim.outputs import OutputFaults
from loadgen.sim.quiet import quiet_hang_ups
from loadgen.sim.server import SimServer
from loadgen.sim.truth import TruthLog

if TYPE_CHECKING:
    import argparse


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGINT or SIGTERM, then stop the engine, the sites and the logs."""
    quiet_hang_ups()
    gpus = _simulated_gpus(args)
    engine = _engine(args, gpus)
    truth = TruthLog(args.truth)
    closer = closer_from_args(args, truth)
    cfg = _sim_config(args)
    server = SimServer(engine, cfg, truth, hooks=faults.hooks_from_args(args, engine, truth), closer=closer)
    per_request = cfg.engine_name is EngineName.LLAMACPP  # llama-server logs per request, not per batch
    decode_log = None if per_request else _decode_log(engine, args.log_file)
    app = server.app()
    dcgm = None if gpus is None else await _serve_dcgm(gpus, args)
    # Freeze what start-up made: a full collection over it (15-25 ms) would otherwise stall the first burst of
    # requests before their arrival is stamped, and the truth would miss that queueing.
    gc.collect()
    gc.freeze()
    engine.start()
    runner = await _serve_api(app, args, closer)
    print(f"loadgen-sim ready on http://{args.host}:{runner.addresses[0][1]} (budget={args.budget} "
          f"topk={args.topk} block={args.block_size} accept_mean={engine.accept_mean:.3f} "
          f"speed={args.speed:g})", flush=True)
    if dcgm is not None:  # a line of its own: the ready line stays within 120 columns
        print(f"loadgen-sim dcgm=http://{args.host}:{dcgm.addresses[0][1]}/metrics", flush=True)
    await _until_signalled_or_idle(server, args.exit_idle)
    await engine.stop()
    await runner.cleanup()
    if dcgm is not None:
        await dcgm.cleanup()
    truth.close()
    if decode_log is not None:
        decode_log.close()


def _engine(args: argparse.Namespace, gpus) -> Engine:
    spec = SpecConfig(budget=args.budget, topk=args.topk, block_size=args.block_size, algorithm=args.algorithm)
    faults = OutputFaults(garbage_above=args.garbage_above, drift_above=args.drift_above,
                          drift_after=args.drift_after)
    return Engine(spec, Roofline(), speed=args.speed, max_running=args.max_running, seed=args.seed,
                  on_utilization=gpus.set_utilization if gpus is not None else None, output_faults=faults)


def _sim_config(args: argparse.Namespace) -> SimConfig:
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    return SimConfig(model=args.model, context_length=args.context_length, api_key=api_key,
                     engine_name=EngineName(args.engine), per_token_events=args.per_token_events, log_file=args.log_file,
                     cache_report=args.cache_report, reasoning_tokens=args.reasoning_tokens,
                     disable_cuda_graph=args.disable_cuda_graph)


def _decode_log(engine: Engine, path: str | None):
    if not path:
        return None
    return DecodeLog(engine, path)


def _simulated_gpus(args: argparse.Namespace):
    """The GPUs behind `--dcgm-port` (None without it): their power follows the engine's load."""
    if args.dcgm_port is None:
        return None
    return SimulatedGpus(n=args.gpus, idle_w=args.idle_w, load_w=args.load_w, limit_w=args.limit_w,
                         export_limit=not args.dcgm_no_limit, collect_interval_s=args.dcgm_collect_ms / 1000,
                         collect_on_timer=args.dcgm_collect_ms > 0, busy_fraction=args.gpu_busy_fraction)


async def _serve_dcgm(gpus, args: argparse.Namespace) -> web.AppRunner:
    """A dcgm-exporter-compatible endpoint over `gpus` (energy = the integral of their power)."""
    runner = web.AppRunner(gpus.make_app(), access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.dcgm_port, reuse_address=True).start()
    return runner


async def _serve_api(app: web.Application, args: argparse.Namespace, closer=None) -> web.AppRunner:
    # streams still open at shutdown are cut after 1 s: they wait on an engine that has stopped
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    stamp_arrivals(runner, closer)
    await web.TCPSite(runner, args.host, args.port, reuse_address=True).start()
    return runner


async def _until_signalled_or_idle(server: SimServer, exit_idle_s: float) -> None:
    """Until SIGINT or SIGTERM, or (with `--exit-idle S` > 0) S seconds without a request."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        if exit_idle_s and server.idle_s() >= exit_idle_s:
            print(f"loadgen-sim: no request for {exit_idle_s:g} s (--exit-idle): stopping", flush=True)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0 if exit_idle_s else None)


def main(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Serve (`argv`, the command line `args` came from, is what `--detach` starts in the background)."""
    if args.detach:
        return service.detach(list(argv or []), args.detach)
    if args.pidfile:
        service.stop_previous(args.pidfile)
        service.write_pid(args.pidfile, os.getpid())
    install_uvloop()
    try:
        asyncio.run(serve(args))
    except OSError as exc:
        print(f"loadgen sim: cannot listen on {args.host}:{args.port}: {exc.strerror}; pick another --port",
              file=sys.stderr)
        return 2
    return 0
