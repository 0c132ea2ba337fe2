"""From parsed flags to a checked `RunConfig`: `config_from_args` calls one function per feature's flags, each
raising UsageError with what is wrong and how to fix it (exit 2 before any load is sent). The checks of the
run's own flags (matrix, output, faults, verification, TLS) are here; a feature with flags of its own has its
check beside them (`open_loop_config`, `parallel_config`, `observe_config`, `workload_config`,
`replay_config`, `slo_config`, `ray_options`)."""

from __future__ import annotations

import argparse
import os
from datetime import datetime

from loadgen.cli.checks import (
    check_api,
    check_input_files,
    check_out_path,
    check_temperature,
    check_url,
    parse_int_list,
    positive,
    trust_config,
)
from loadgen.cli.observe_config import exporter_config, telemetry_config
from loadgen.cli.open_loop_config import open_loop_config
from loadgen.cli.parallel_config import parallel_config
from loadgen.cli.ray_options import ray_config
from loadgen.cli.replay_config import cancel_config, session_config, shared_prefix_config, trace_config
from loadgen.cli.slo_config import slo_config
from loadgen.cli.workload_config import workload_config
from loadgen.config import FaultsConfig, RunConfig, TlsConfig, VerifyConfig
from loadgen.errors import UsageError
from loadgen.names import DriftCheck, ServerDownPolicy, VerifyMode, values
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
