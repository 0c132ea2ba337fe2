"""The workload flags (`--dataset`, `--category-field`, `--max-bad-rows`, `--prefix-cache`,
`--max-request-rate`, and what `--ignore-eos` defaults to), checked into a `WorkloadConfig`. The dataset is
read here, so a bad file or too many bad rows end the program (exit 2) before anything starts."""

from __future__ import annotations

import argparse
import math

from loadgen.config import SLOT_RAMP_AUTO_S, LengthSpread, RunConfig, WorkloadConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.names import PrefixCache
from loadgen.workload import lengths
from loadgen.workload.corpus import load_prompts_file
from loadgen.workload.dataset import load_dataset
from loadgen.workload.textfile import WorkloadError


def workload_config(a: argparse.Namespace, cfg: RunConfig, default_contexts: str) -> WorkloadConfig:
    """Checks the flags and, with --dataset, sets the matrix to one cell per load level over the rows
    (`context_tokens` 0) and the default requests per cell to the number of rows (in place on `cfg`)."""
    if a.max_bad_rows < 0:
        raise UsageError(f"--max-bad-rows {a.max_bad_rows}: must be ≥ 0 (0 = every row must be usable)")
    w = WorkloadConfig(category_field=a.category_field, max_bad_rows=a.max_bad_rows,
                       prefix_cache=PrefixCache(a.prefix_cache),
                       max_request_rate=_max_request_rate(a, cfg), slot_ramp_s=slot_ramp(a),
                       ignore_eos_source="flag" if a.ignore_eos is not None else "default")
    w.context_spreads, w.output_spread = _spreads(a, cfg, default_contexts)
    if a.dataset and (w.context_spreads or w.output_spread):
        raise UsageError("length spreads (N±P%, --context-dist, --output-dist) shape the synthetic matrix; a "
                         "--dataset request takes its lengths from its row")
    if not a.dataset:
        _synthetic_checks(a, w)
        return w
    if a.prompts:
        raise UsageError("--prompts and --dataset exclude each other: --prompts is a text source cut to "
                         "--contexts lengths, --dataset replays rows as they are")
    _dataset(a, cfg, w, default_contexts)
    return w


def _synthetic_checks(a: argparse.Namespace, w: WorkloadConfig) -> None:
    if w.prefix_cache is not PrefixCache.UNIQUE:
        raise UsageError("--prefix-cache allow applies to --dataset rows; synthetic prompts always get a "
                         "unique first line")
    if a.prompts:
        try:  # its bad rows are named now, before anything starts; the run reads it again quietly
            load_prompts_file(a.prompts, a.max_bad_rows)
        except WorkloadError as exc:
            raise UsageError(str(exc)) from None


def _dataset(a: argparse.Namespace, cfg: RunConfig, w: WorkloadConfig, default_contexts: str) -> None:
    """Reads the dataset (bad rows named) and sets the matrix over its rows (in place on `cfg` and `w`)."""
    try:
        ds = load_dataset(a.dataset, a.category_field, a.max_bad_rows)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    log(ds.describe())
    multi = sum(1 for r in ds.rows if sum(m["role"] == "user" for m in r.conversation or ()) > 1)
    if multi and not a.sessions:
        log(f"{multi} rows hold several user turns: each is sent as one request with its turns as they are; "
            "--sessions replays them as conversations (the server's answers in the history)")
    if a.contexts != default_contexts:
        log("--contexts is not used with --dataset: each request's prompt is its row")
    w.dataset, w.dataset_format = a.dataset, ds.format
    cfg.contexts = [0]
    cfg.requests_per_cell = cfg.requests_per_cell or len(ds.rows)
    if a.ignore_eos is None:
        w.ignore_eos_source, cfg.ignore_eos = "rows", False

def _spreads(a: argparse.Namespace, cfg: RunConfig, default_contexts: str) -> tuple[tuple, LengthSpread | None]:
    """The prompt-length spreads by centre and the output-length spread; --context-dist / --output-dist set
    the matrix's length to their mean (in place on `cfg`)."""
    contexts = tuple(lengths.centres("--contexts", a.contexts)[1].items())
    output = lengths.centre_int("--max-tokens", a.max_tokens)[1]
    if a.context_dist:
        if a.contexts != default_contexts:
            raise UsageError("--context-dist replaces --contexts; give one of them")
        centre, spread = lengths.parse_dist("--context-dist", a.context_dist)
        cfg.contexts, contexts = [centre], ((centre, spread),)
    if a.output_dist:
        if output is not None or a.max_tokens != str(RunConfig(url=None).max_tokens):
            raise UsageError("--output-dist replaces --max-tokens; give one of them")
        cfg.max_tokens, output = lengths.parse_dist("--output-dist", a.output_dist)
    return contexts, output


def slot_ramp(a: argparse.Namespace) -> float:
    """--slot-ramp in seconds; not given: SLOT_RAMP_AUTO_S with --slo (the first wave then meets its targets as
    later waves do), else 0; the slots of worker processes do not ramp."""
    many = a.workers not in (None, "1") or a.shard
    ramp_s = a.slot_ramp
    if ramp_s is None:
        return SLOT_RAMP_AUTO_S if a.slo and not many else 0.0
    if not (math.isfinite(ramp_s) and ramp_s >= 0):
        raise UsageError(f"--slot-ramp {ramp_s:g}: must be ≥ 0 seconds (0 = all slots at once), e.g. 1")
    if ramp_s and many:
        raise UsageError("--slot-ramp spreads the slots of one process; leave out --workers and --shard")
    return ramp_s


def _max_request_rate(a: argparse.Namespace, cfg: RunConfig) -> float | None:
    r = a.max_request_rate
    if r is None:
        return None
    if not (math.isfinite(r) and r > 0):
        raise UsageError(f"--max-request-rate {r:g}: must be a finite number of requests per second > 0")
    if a.request_rate or a.ramp:
        raise UsageError("--max-request-rate caps closed-loop cells; an open-loop cell already has its rate "
                         "(--request-rate)")
    if (a.workers not in (None, "1")) or a.shard:
        raise UsageError("--max-request-rate throttles the slots of one process; leave out --workers and --shard")
    return r
