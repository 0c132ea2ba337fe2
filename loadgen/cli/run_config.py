"""From parsed flags to a checked `RunConfig`: one function per feature's flags, each raising UsageError
with what is wrong and how to fix it (exit 2 before any load is sent)."""

from __future__ import annotations

import argparse
import math
import os
from datetime import datetime
from urllib.parse import urlparse

from loadgen.cli.checks import (
    check_api,
    check_input_files,
    check_out_path,
    check_temperature,
    check_url,
    parse_float_list,
    parse_int_list,
    parse_start_at,
    parse_workers,
    positive,
    trust_config,
)
from loadgen.cli.ray_options import ray_config
from loadgen.cli.replay_config import cancel_config, session_config, shared_prefix_config, trace_config
from loadgen.cli.slo_config import slo_config
from loadgen.cli.workload_config import workload_config
from loadgen.config import (
    ExporterConfig,
    FaultsConfig,
    OpenLoopConfig,
    ParallelConfig,
    RampSpec,
    RunConfig,
    TelemetryConfig,
    TlsConfig,
    VerifyConfig,
)
from loadgen.errors import UsageError
from loadgen.metrics.open_loop import MIN_RAMP_REQUESTS
from loadgen.names import ArrivalLaw, DriftCheck, HttpClient, ServerDownPolicy, ServerMetrics, VerifyMode, values
from loadgen.parallel.open_files import check_open_files, raise_open_file_limit, workers_needed
from loadgen.parallel.workers import auto_workers
from loadgen.telemetry.accept_log import split_command
from loadgen.workload import lengths

CONTEXTS_HINT = "give prompt lengths like 60,1024 or ranges like 1024±25%"


def config_from_args(a: argparse.Namespace) -> RunConfig:
    cfg = RunConfig(
        url=check_url(a.url) if a.url else None, api=check_api(a.api), model=a.model,
        concurrency=parse_int_list("--concurrency", a.concurrency),
        contexts=parse_int_list("--contexts", lengths.centres("--contexts", a.contexts)[0], 1, CONTEXTS_HINT),
        max_tokens=positive("--max-tokens", lengths.centre_int("--max-tokens", a.max_tokens)[0]),
        requests_per_cell=positive("--requests-per-cell", a.requests_per_cell),
        duration_per_cell_s=positive("--duration-per-cell", a.duration_per_cell),
        warmup=positive("--warmup", a.warmup, allow_zero=True),
        label=a.label, seed=a.seed, timeout_s=positive("--timeout", a.timeout),
        idle_timeout_s=positive("--idle-timeout", a.idle_timeout), api_key_env=a.api_key_env,
        api_key_file=a.api_key_file, prompts_file=a.prompts, ignore_eos=a.ignore_eos is not False,
        temperature=check_temperature(a.temperature),
        sim_args=["--speed", str(a.sim_speed), "--budget", str(a.sim_budget), "--topk", str(a.sim_topk)],
    )
    cfg.out, cfg.out_auto = out_path(a), not a.out and not a.label
    cfg.telemetry = telemetry_config(a)
    cfg.open_loop = open_loop_config(a, cfg.warmup)
    cfg.faults = faults_config(a)
    cfg.parallel = ray_config(a, parallel_config(a, cfg))
    cfg.exporter = exporter_config(a)
    cfg.workload = workload_config(a, cfg, ",".join(map(str, RunConfig(url=None).contexts)))
    cfg.trace = trace_config(a, cfg)
    cfg.cancel = cancel_config(a, cfg)
    session_config(a, cfg)
    cfg.workload.shared_prefix = shared_prefix_config(a, cfg)
    cfg.verify = verify_config(a, cfg)
    cfg.slo = slo_config(a)
    cfg.tls = tls_config(a, cfg.url)
    trust_config(a, cfg)
    cfg.repeat = positive("--repeat", a.repeat)
    cfg.wide = a.wide
    cfg.drift_check = DriftCheck(a.drift_check)
    check_input_files(a)  # after the flags' own checks (--verify-prompts without --verify says that first)
    return cfg


def out_path(a: argparse.Namespace) -> str:
    if a.out:
        return check_out_path(a.out)
    os.makedirs("results", exist_ok=True)
    name = a.label or datetime.now().strftime("loadgen-%Y%m%d-%H%M%S")
    return os.path.join("results", f"{name}.json")


def metrics_url(value: str) -> str:
    """`--server-metrics` URL: a base URL gets /metrics appended."""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--server-metrics {value!r}: give auto, off, or a URL such as "
                         "http://gpu-host:30000/metrics")
    return value.rstrip("/") + "/metrics" if parsed.path in ("", "/") else value


def telemetry_config(a: argparse.Namespace) -> TelemetryConfig:
    if a.telemetry_interval <= 0:
        raise UsageError(f"--telemetry-interval: {a.telemetry_interval} must be > 0")
    dcgm = [u.strip() for u in a.dcgm.split(",")] if a.dcgm else []
    for u in dcgm:
        if not u.startswith(("http://", "https://")):
            raise UsageError(f"--dcgm {u!r} needs a scheme and host, e.g. http://gpu-node-1:9400/metrics")
    server_metrics = (a.server_metrics or ServerMetrics.AUTO).strip()
    if server_metrics not in (ServerMetrics.AUTO, ServerMetrics.OFF):
        server_metrics = metrics_url(server_metrics)
    argv = split_command(a.accept_log_cmd) if a.accept_log_cmd is not None else None
    return TelemetryConfig(server_metrics=server_metrics, accept_log_cmd=a.accept_log_cmd, accept_log_argv=argv,
                           dcgm=dcgm, nvml=a.nvml, telemetry_interval_s=a.telemetry_interval)


def parse_ramp(text: str) -> RampSpec:
    parts = text.split(":")
    try:
        r0, r1, s = (float(x) for x in parts)
    except ValueError:
        raise UsageError(f"--ramp {text!r}: give R0:R1:S as three numbers, e.g. --ramp 1:40:60") from None
    if not all(math.isfinite(x) for x in (r0, r1, s)) or not (0 <= r0 < r1 and s > 0):
        raise UsageError(f"--ramp {text!r}: needs 0 ≤ R0 < R1 and S > 0 (finite), e.g. --ramp 1:40:60")
    return RampSpec(r0, r1, s)


def open_loop_config(a: argparse.Namespace, warmup: int) -> OpenLoopConfig:
    rates = parse_float_list("--request-rate", a.request_rate) if a.request_rate else None
    if rates and len(set(rates)) < len(rates):
        raise UsageError(f"--request-rate {a.request_rate}: a rate appears twice; give each rate once")
    ramp = parse_ramp(a.ramp) if a.ramp else None
    if rates and ramp:
        raise UsageError("--request-rate and --ramp exclude each other; give one of them")
    on = bool(rates or ramp)
    for flag, value in (("--arrival", a.arrival), ("--max-concurrency", a.max_concurrency),
                        ("--burstiness", a.burstiness)):
        if value is not None and not on and not (a.trace and flag == "--max-concurrency"):
            raise UsageError(f"{flag} applies to open-loop load; add --request-rate R or --ramp R0:R1:S")
    law = ArrivalLaw(a.arrival or ArrivalLaw.POISSON)
    check_arrival(law, a.burstiness)
    if a.max_concurrency is not None and a.max_concurrency < 1:
        raise UsageError(f"--max-concurrency {a.max_concurrency}: must be ≥ 1 (leave it out for no cap)")
    if (a.slo_ttft_ms is not None or a.ramp_window is not None) and not ramp:
        raise UsageError("--slo-ttft-ms and --ramp-window belong to a ramp; add --ramp R0:R1:S")
    if ramp:
        check_ramp(a, ramp, warmup)
    return OpenLoopConfig(request_rate=rates, arrival=law if on else None, burstiness=a.burstiness,
                          max_concurrency=a.max_concurrency, ramp=ramp, slo_ttft_ms=a.slo_ttft_ms,
                          ramp_window_s=a.ramp_window)


def check_arrival(law: ArrivalLaw, burstiness: float | None) -> None:
    if burstiness is not None and law is not ArrivalLaw.GAMMA:
        raise UsageError("--burstiness shapes gamma arrivals only; add --arrival gamma or drop --burstiness")
    if law is ArrivalLaw.GAMMA and burstiness is None:
        raise UsageError("--arrival gamma needs --burstiness B (CV² = 1/B: 0.5 bursty, 1 Poisson, 4 regular)")
    if burstiness is not None and not (burstiness > 0 and math.isfinite(burstiness)):
        raise UsageError(f"--burstiness {burstiness}: must be a finite number > 0")


def check_ramp(a: argparse.Namespace, ramp: RampSpec, warmup: int) -> None:
    if a.slo_ttft_ms is None or not a.slo_ttft_ms > 0:
        raise UsageError("--ramp needs --slo-ttft-ms MS > 0: the TTFT p99 that defines 'sustainable'")
    if a.ramp_window is not None and not 0 < a.ramp_window <= ramp.duration_s:
        raise UsageError(f"--ramp-window {a.ramp_window}: must be > 0 and ≤ the ramp's {ramp.duration_s:g} s")
    expected = (ramp.r0 + ramp.r1) / 2 * ramp.duration_s
    if expected < warmup + MIN_RAMP_REQUESTS:
        raise UsageError(f"--ramp {a.ramp}: only about {expected:.0f} arrivals; the sustainable rate "
                         f"needs ≥ {warmup + MIN_RAMP_REQUESTS} (raise the rates or lengthen S)")


def faults_config(a: argparse.Namespace) -> FaultsConfig:
    policies = values(ServerDownPolicy)
    if a.on_server_down not in policies:
        raise UsageError(f"--on-server-down {a.on_server_down!r} is unknown; choose one of {', '.join(policies)}")
    if a.server_down_after < 1:
        raise UsageError(f"--server-down-after {a.server_down_after} must be ≥ 1, e.g. 3")
    if not a.server_wait_timeout > 0:
        raise UsageError(f"--server-wait-timeout {a.server_wait_timeout:g} must be > 0 seconds, e.g. 600")
    if a.cell_attempts < 1:
        raise UsageError(f"--cell-attempts {a.cell_attempts} must be ≥ 1, e.g. 3")
    if not a.drain_timeout >= 0:
        raise UsageError(f"--drain-timeout {a.drain_timeout:g} must be ≥ 0 seconds, e.g. 30")
    return FaultsConfig(on_server_down=ServerDownPolicy(a.on_server_down), server_down_after=a.server_down_after,
                        server_wait_timeout_s=a.server_wait_timeout, cell_attempts=a.cell_attempts,
                        drain_timeout_s=a.drain_timeout)


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


def exporter_config(a: argparse.Namespace) -> ExporterConfig:
    port, host, linger = a.metrics_port, a.metrics_host, a.linger
    limit = getattr(a, "gpu_power_limit", None)
    if limit is not None and not (0 < limit < 1e5):
        raise UsageError(f"--gpu-power-limit {limit:g}: give the power limit per GPU in W, e.g. 700")
    if port is None:
        if host is not None or linger is not None or limit is not None:
            raise UsageError("--metrics-host, --linger and --gpu-power-limit need --metrics-port")
        return ExporterConfig()
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port {port}: a port is 0-65535 (0 = a free one)")
    if linger is not None and linger < 0:
        raise UsageError(f"--linger {linger:g}: must be >= 0 seconds")
    d = ExporterConfig()
    return ExporterConfig(metrics_port=port, metrics_host=host or d.metrics_host,
                          metrics_linger_s=d.metrics_linger_s if linger is None else linger,
                          gpu_power_limit_w=limit)


def verify_config(a: argparse.Namespace, cfg: RunConfig) -> VerifyConfig:
    """`--verify` and its settings; the prompts file and a reference file are read here (exit 2 when they
    cannot be), before any load."""
    given = [flag for flag, value in (("--verify-prompts", a.verify_prompts), ("--verify-reference", a.verify_reference),
                                      ("--verify-save-reference", a.verify_save_reference)) if value]
    if a.max_garbage_fraction != VerifyConfig.max_garbage_fraction:
        given.append("--max-garbage-fraction")
    if a.verify is None:
        if given:
            raise UsageError(f"{given[0]} needs --verify (add --verify, or --verify exact)")
        return VerifyConfig()
    if cfg.parallel.workers > 1 or cfg.parallel.shard:
        raise UsageError("--verify runs in one process: leave out --workers and --shard (the verification "
                         "requests are a few per cell)")
    if not 0 <= a.max_garbage_fraction <= 1:
        raise UsageError(f"--max-garbage-fraction {a.max_garbage_fraction:g}: give a fraction from 0 to 1")
    if a.verify_max_tokens < 1:
        raise UsageError(f"--verify-max-tokens {a.verify_max_tokens}: must be ≥ 1, e.g. 64")
    if a.verify_save_reference:
        check_out_path(a.verify_save_reference, "--verify-save-reference")
    return VerifyConfig(mode=VerifyMode(a.verify), prompts_file=a.verify_prompts, max_tokens=a.verify_max_tokens,
                        reference_file=a.verify_reference, save_reference=a.verify_save_reference,
                        max_garbage_fraction=a.max_garbage_fraction)


def tls_config(a: argparse.Namespace, url: str | None) -> TlsConfig:
    """--ca-cert / --insecure: only with an https:// --url, not both (the CA file was found readable by
    `check_input_files`)."""
    ca_cert, insecure = getattr(a, "ca_cert", None), getattr(a, "insecure", False)
    if not (ca_cert or insecure):
        return TlsConfig()
    flag = "--ca-cert" if ca_cert else "--insecure"
    if ca_cert and insecure:
        raise UsageError("--ca-cert and --insecure: give one (--insecure would ignore the CA)")
    if not (url or "").startswith("https://"):
        raise UsageError(f"{flag} is for an https:// --url (got {url or 'the built-in simulator'})")
    return TlsConfig(ca_cert=ca_cert, insecure=insecure)
