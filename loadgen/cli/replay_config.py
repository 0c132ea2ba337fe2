"""The session, trace-replay and cancellation flags (`--sessions`, `--think-time`, `--trace`, `--trace-speed`,
`--cancel-fraction`, `--cancel-after`, `--cancel-after-tokens`), checked into the `WorkloadConfig`, a
`TraceConfig` and a `CancelConfig`. The trace is read here, so a bad
row (named `FILE:LINE`) ends the program (exit 2) before anything starts."""

from __future__ import annotations

import argparse
import math

from loadgen.cli.checks import parse_float_list
from loadgen.config import CancelConfig, RunConfig, TraceConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.names import Api
from loadgen.workload.textfile import WorkloadError
from loadgen.workload.trace import load_trace

MIN_OWN_TOKENS = 24  # a prompt's own part after a shared prefix: its tag and some text

# flags a trace replaces: (flag, is it given?) — the trace's timestamps are its load and its rows its requests
_EXCLUDED = (("--dataset", lambda a: a.dataset), ("--prompts", lambda a: a.prompts),
             ("--request-rate", lambda a: a.request_rate), ("--ramp", lambda a: a.ramp),
             ("--duration-per-cell", lambda a: a.duration_per_cell), ("--warmup", lambda a: a.warmup),
             ("--requests-per-cell", lambda a: a.requests_per_cell), ("--shard", lambda a: a.shard),
             ("--workers", lambda a: a.workers not in (None, "1")),
             ("--verify", lambda a: getattr(a, "verify", None)))  # its jobs are not rows of the trace (not yet)


def trace_config(a: argparse.Namespace, cfg: RunConfig) -> TraceConfig:
    """Reads the trace (bad rows named) and sets the matrix to one cell per speed (in place on `cfg`)."""
    if not a.trace:
        if a.trace_speed:
            raise UsageError("--trace-speed applies to a trace replay; add --trace FILE")
        return TraceConfig()
    given = [flag for flag, on in _EXCLUDED if on(a)]
    if given:
        raise UsageError(f"--trace sends the trace's own rows at their timestamps; leave out {', '.join(given)}")
    speeds = parse_float_list("--trace-speed", a.trace_speed) if a.trace_speed else [1.0]
    if len(set(speeds)) < len(speeds):
        raise UsageError(f"--trace-speed {a.trace_speed}: a speed appears twice; give each speed once")
    try:
        trace = load_trace(a.trace, a.max_bad_rows)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    log(trace.describe())
    cfg.contexts = [0]
    return TraceConfig(trace=a.trace, trace_speeds=speeds, trace_rates=[trace.mean_rate(s) for s in speeds],
                       trace_max_concurrency=a.max_concurrency)


def cancel_config(a: argparse.Namespace, cfg: RunConfig) -> CancelConfig:
    f, after_s, after_tokens = a.cancel_fraction, a.cancel_after, a.cancel_after_tokens
    if f is None:
        if after_s is not None or after_tokens is not None:
            raise UsageError("--cancel-after and --cancel-after-tokens need --cancel-fraction F (the share of "
                             "requests to close)")
        return CancelConfig()
    if not (math.isfinite(f) and 0 < f < 1):
        raise UsageError(f"--cancel-fraction {f:g}: give a share of the requests between 0 and 1, e.g. 0.25")
    if (after_s is None) == (after_tokens is None):
        raise UsageError("--cancel-fraction needs one of --cancel-after S (seconds after the send) or "
                         "--cancel-after-tokens N (output tokens received)")
    if after_s is not None and not (math.isfinite(after_s) and after_s > 0):
        raise UsageError(f"--cancel-after {after_s:g}: must be a finite number of seconds > 0")
    if after_tokens is not None and after_tokens < 1:
        raise UsageError(f"--cancel-after-tokens {after_tokens}: must be ≥ 1")
    if a.workers not in (None, "1") or a.shard:
        raise UsageError("--cancel-fraction closes streams of this process's requests; leave out --workers and "
                         "--shard")
    return CancelConfig(cancel_fraction=f, cancel_after_s=after_s, cancel_after_tokens=after_tokens)


_NOT_WITH_SESSIONS = (("--request-rate", lambda a: a.request_rate), ("--ramp", lambda a: a.ramp),
                      ("--duration-per-cell", lambda a: a.duration_per_cell), ("--shard", lambda a: a.shard),
                      ("--workers", lambda a: a.workers not in (None, "1")),
                      ("--cancel-fraction", lambda a: a.cancel_fraction), ("--trace", lambda a: a.trace),
                      ("--verify", lambda a: getattr(a, "verify", None)))  # its jobs are not sessions (not yet)


def session_config(a: argparse.Namespace, cfg: RunConfig) -> None:
    """--sessions and --think-time into `cfg.workload` (in place)."""
    think = a.think_time
    if think is not None and not (math.isfinite(think) and think >= 0):
        raise UsageError(f"--think-time {think:g}: must be a finite number of seconds ≥ 0")
    if not a.sessions:
        if think is not None:
            raise UsageError("--think-time applies to multi-turn sessions; add --sessions")
        return
    if not a.dataset:
        raise UsageError("--sessions replays the user turns of --dataset rows as conversations; add --dataset FILE")
    if cfg.api is not Api.OPENAI_CHAT:
        raise UsageError(f"--sessions sends each turn with its history as chat messages: use --api openai-chat "
                         f"(not {cfg.api})")
    given = [flag for flag, on in _NOT_WITH_SESSIONS if on(a)]
    if given:
        raise UsageError(f"--sessions runs C conversations in closed loop; leave out {', '.join(given)}")
    cfg.workload.sessions, cfg.workload.think_time_s = True, think or 0.0


def shared_prefix_config(a: argparse.Namespace, cfg: RunConfig) -> tuple[int, int] | None:
    """--shared-prefix GROUPS:TOKENS, each prompt length longer than TOKENS (the rest is the request's own)."""
    text = a.shared_prefix
    if text is None:
        return None
    try:
        groups, tokens = (int(x) for x in text.split(":"))
    except ValueError:
        raise UsageError(f"--shared-prefix {text!r}: give GROUPS:TOKENS, e.g. 4:512") from None
    if groups < 1 or tokens < 1:
        raise UsageError(f"--shared-prefix {text!r}: GROUPS and TOKENS must be ≥ 1")
    if a.dataset or a.trace or a.prompts:
        raise UsageError("--shared-prefix shapes the synthetic prompts; a --dataset or --trace brings its own "
                         "(--prompts: not yet)")
    short = [c for c in cfg.contexts if c < tokens + MIN_OWN_TOKENS]
    if short:
        raise UsageError(f"--contexts {','.join(map(str, short))}: a prompt holds the {tokens}-token shared "
                         f"prefix and at least {MIN_OWN_TOKENS} tokens of its own; use longer contexts or a "
                         "shorter prefix")
    return groups, tokens
