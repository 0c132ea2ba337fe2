"""Building a run from its configuration: the one place that chooses each part of the request path.

    driver     ClosedLoop | OpenLoop | TraceReplay (--trace) | SessionLoop (--sessions), wrapped by WorkerDriver (--workers), RayDriver (--ray), ShardPart (--shard),
               AlignedStart (--start-at)
    report     the load's banner and tables: open loop (--request-rate, --ramp, --trace), ceiling (--max-request-rate)
    transport  H1Transport (default) | AiohttpTransport (--http-client aiohttp), wrapped by CancellingTransport
               (--cancel-fraction)
    sinks      JSONL records, the server-down guard, the live exporter (--metrics-port), the console (a line per
               cell, the tables after the run)
    policies   ServerDownPolicy (--on-server-down), Interrupts (--drain-timeout)
    preflight  TlsPreflight (an https:// certificate is trusted), TelemetryPreflight (requested sources answer),
               ReadyWait (--wait-ready)
    telemetry  TelemetryPlan (server metrics, log lines, DCGM/NVML)
    verifier   Verifier (--verify): verification jobs in every cell, their sender, the reference
    drift      ControlCheck (--drift-check): the first cell measured again at the end, judged beyond noise
    services   the log command, the worker pool, the exporter: they live as long as the run
    shape      the matrix, or a search's probes with its early stop and answer (`loadgen search`), or a tune's
               parts (`loadgen tune`), each sized by PartSizes

A new part is one class in its stage's folder and one choice here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.cli.exporter import live_exporter
from loadgen.cli.telemetry import TelemetryPlan
from loadgen.cli.telemetry_checks import TelemetryPreflight
from loadgen.client.config import ClientConfig
from loadgen.client.tls import TlsPreflight, insecure_warning, say_proxy_notice
from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.names import HttpClient
from loadgen.parallel.ray_driver import RayDriver
from loadgen.parallel.ray_pool import RayPool
from loadgen.parallel.shard import AlignedStart, ShardPart
from loadgen.parallel.worker_driver import WorkerDriver
from loadgen.parallel.workers import WorkerPool
from loadgen.record import CellKey
from loadgen.report.console_sink import ConsoleSink
from loadgen.report.load_banner import open_loop_banner, throttle_banner, trace_banner
from loadgen.report.open_table import render as open_loop_table
from loadgen.report.throttle_table import throttle_table
from loadgen.results.document import ResultsFile, requests_path
from loadgen.run.control import RunControl
from loadgen.run.drift_check import ControlCheck
from loadgen.run.drivers import ClosedLoop, Driver, OpenLoop
from loadgen.run.early_stop import OversaturationStop
from loadgen.run.interrupts import Interrupts
from loadgen.run.part_sizes import PartSizes
from loadgen.run.ready_wait import ReadyWait
from loadgen.run.runner import CellCheck, CellPlan, Runner, RunParts, Service, Table, new_run_id
from loadgen.run.server_down import ServerDownPolicy, ServerGuard
from loadgen.run.session_driver import SessionLoop
from loadgen.run.trace_driver import TraceReplay
from loadgen.run.transport import AiohttpTransport, CancellingTransport, H1Transport, Transport
from loadgen.schedule.throttle import StartGate
from loadgen.search.plan import SizedCells
from loadgen.search.state import SearchWatcher
from loadgen.sinks.base import Sink
from loadgen.sinks.jsonl import JsonlSink
from loadgen.tune.live import TuneWatcher
from loadgen.verify.prompts import load_prompts
from loadgen.verify.reference import load_reference
from loadgen.verify.verifier import Verifier
from loadgen.workload.trace import load_trace

TRANSPORTS: dict[HttpClient, Callable[[ClientConfig], Transport]] = {HttpClient.H1: H1Transport,
                                                                     HttpClient.AIOHTTP: AiohttpTransport}


def make_transport(cfg: RunConfig, url: str, headers: dict) -> Transport:
    if cfg.tls.insecure:
        log(insecure_warning())
    say_proxy_notice(url)
    ccfg = ClientConfig(base_url=url, api=cfg.api, timeout_s=cfg.timeout_s, idle_timeout_s=cfg.idle_timeout_s,
                        headers=headers, tls=cfg.tls)
    transport = TRANSPORTS[cfg.parallel.http_client](ccfg)
    return CancellingTransport(transport, cfg.cancel, cfg.seed) if cfg.cancel.enabled else transport


def make_driver(cfg: RunConfig, url: str, headers: dict, transport: Transport, guard: ServerGuard,
                services: list[Service], sections: dict) -> Driver:
    par, trace = cfg.parallel, cfg.trace.trace  # a trace file: `cfg.trace.enabled`
    if trace is not None:
        driver: Driver = TraceReplay(cfg.trace, transport, load_trace(trace, cfg.workload.max_bad_rows, quiet=True))
    elif cfg.workload.sessions:
        driver = SessionLoop(cfg.size, transport)
    elif cfg.open_loop.enabled:
        if par.workers > 1 or par.ray_address:
            log("--workers/--ray: open-loop cells run in the main process")
        driver = OpenLoop(cfg.size, cfg.open_loop, cfg.seed, transport)
    else:
        rate = cfg.workload.max_request_rate
        driver = ClosedLoop(cfg.size, transport, pause=guard.pause, gate=StartGate(rate) if rate else None,
                            slot_ramp_s=cfg.workload.slot_ramp_s)
        if par.ray_address:
            ray_pool = RayPool(par, cfg, url, headers, sections.setdefault("ray", {}))
            services.append(ray_pool)
            driver = RayDriver(driver, ray_pool)
        elif par.workers > 1:
            pool = WorkerPool(par.workers, cfg, url, headers)
            services.append(pool)
            driver = WorkerDriver(driver, pool)
        if par.shard:
            driver = ShardPart(driver, *par.shard)
    if par.start_at is not None:
        driver = AlignedStart(driver, par.start_at, par.cell_period_s)
    return driver


def make_verifier(cfg: RunConfig, url: str) -> Verifier | None:
    """--verify: the prompts and a saved reference are read now (exit 2 when they cannot be), before any load."""
    v = cfg.verify
    if not v.enabled:
        return None
    reference = load_reference(v.reference_file) if v.reference_file else None
    return Verifier(v, cfg.api, url, load_prompts(v.prompts_file), reference)


def load_report(cfg: RunConfig) -> tuple[str | None, list[Table]]:
    """What is said about the kind of load: a banner before the run, tables after the matrix."""
    if cfg.trace.enabled:
        return trace_banner(cfg.trace), [open_loop_table]
    if cfg.open_loop.enabled:
        return open_loop_banner(cfg.open_loop), [lambda cells: open_loop_table(cells, cfg.wide)]
    if cfg.workload.max_request_rate:
        return throttle_banner(cfg.workload.max_request_rate), [throttle_table]
    return None, []


@dataclass
class Shape:
    """Which cells a run measures and what it says after them: the matrix (default), or a search's probes
    (`plan`), the watchers that may stop a probe early and the search's answer (`tables`)."""

    plan: CellPlan | None = None
    early_stops: list[OversaturationStop] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    checks: list[CellCheck] = field(default_factory=list)  # the search's judgement of its cells
    sized: Callable[[CellKey], int] | None = None  # a search's measured requests of a cell (0: the driver's own)
    watch: Callable[[SearchWatcher], None] | None = None  # the search's state, to the live exporter
    parts: Callable[[CellKey], int] | None = None  # a tune's measured requests of each part, exactly (0: the matrix's)
    tune_watch: Callable[[TuneWatcher], None] | None = None  # the tune's state, to the live exporter


def sized(driver: Driver, shape: Shape) -> Driver:
    """The driver with a search's cells raised to what its walk asks, or a tune's parts at exactly their size."""
    if shape.sized is not None:
        driver = SizedCells(driver, shape.sized)
    return driver if shape.parts is None else PartSizes(driver, shape.parts)


def results_path(cfg: RunConfig) -> str:
    """The run's results file: `--out`, or the name `config_from_args` gave it."""
    assert cfg.out is not None  # named by config_from_args
    return cfg.out


def add_exporter(cfg: RunConfig, run_id: str, shape: Shape, sinks: list[Sink], services: list[Service]) -> None:
    """--metrics-port: the live exporter as a sink and a service, watching the search's or the tune's state."""
    exporter = live_exporter(run_id, cfg.exporter, cfg.label, cfg.slo)
    if exporter is None:
        return
    sinks.append(exporter[0])
    services.append(exporter[1])
    if shape.watch is not None:
        shape.watch(exporter[0].search)
    if shape.tune_watch is not None:
        shape.tune_watch(exporter[0].tune)


def build_runner(cfg: RunConfig, url: str, *, sinks: list[Sink] | None = None, results: ResultsFile | None = None,
                 checks: list[CellCheck] | None = None, extra_sinks: list[Sink] | None = None,
                 shape: Shape | None = None, resume_command: list[str] | None = None) -> Runner:
    """The runner of `cfg` against `url`. `sinks` default to the JSONL records beside `cfg.out`; a sweep
    passes its own sinks, results file and checks. `extra_sinks` come first (a test's probes); `shape` makes
    it a search; an interrupt prints `resume_command`, the command that resumes the run."""
    shape, out = shape or Shape(), results_path(cfg)
    run_id = cfg.parallel.run_id or new_run_id()
    headers = cfg.auth_headers()
    control = RunControl()
    guard = ServerGuard(url, cfg.faults.server_down_after)
    sinks = [*(extra_sinks or []), *([JsonlSink(requests_path(out), label=cfg.label)] if sinks is None else sinks)]
    sinks += [guard, *shape.early_stops]
    telemetry = TelemetryPlan(cfg.telemetry)
    services: list[Service] = [telemetry.log_command] if telemetry.log_command else []
    transport = make_transport(cfg, url, headers)
    results = results or ResultsFile(out)
    driver = sized(make_driver(cfg, url, headers, transport, guard, services, results.sections), shape)
    add_exporter(cfg, run_id, shape, sinks, services)
    banner, tables = load_report(cfg)
    console = ConsoleSink(cfg.label, cfg.repeat, cfg.wide, tables + shape.tables)
    sinks.append(console)
    verifier = make_verifier(cfg, url)
    parts = RunParts(
        driver=driver, banner=banner, tables=console.tables, transport=transport, control=control, sinks=sinks,
        telemetry=telemetry, plan=shape.plan, verifier=verifier,
        # a search checks drift its own way
        drift=ControlCheck(cfg.drift_check, cfg.size, bool(cfg.parallel.shard)) if shape.plan is None else None,
        server_down=ServerDownPolicy(cfg.faults, guard, control, timed_cells=bool(cfg.duration_per_cell_s),
                                     early_stops=shape.early_stops),
        services=services, checks=[*(checks or []), *shape.checks],
        preflight=[TlsPreflight(cfg.tls), TelemetryPreflight(cfg.telemetry),
                   ReadyWait(cfg.wait_ready_s, cfg.api, cfg.model, headers, control, cfg.wait_refused_s)],
        interrupts=Interrupts(control, cfg.faults.drain_timeout_s, out, resume_command))
    return Runner(cfg, url, parts, results, run_id, headers)
