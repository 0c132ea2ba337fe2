"""Client health: whether the load generator itself kept up (event-loop lag, CPU, send lateness).

Saturation thresholds (docs/performance.md): event-loop lag p99 > 10 ms in at least MIN_LATE_LAGS samples, or
client CPU > 90 % of one core, or (open loop) send lateness p99 > 50 ms. A saturated client's figures measure
the client, not the server. Why the count: the lag is sampled every 50 ms, so a 7 s cell has ~140 samples and
its p99 interpolates between the two largest: one stall (a GC pause, the process descheduled on a busy
machine) flagged such a cell while a 13 s cell with the same stall, judged on its third largest, passed.
`saturation_advice` says what would help in the cell's case.
One process's block comes from `client_verdict`; blocks of several processes (worker processes of one run,
shards of a merged run) are combined by `combine`, and only there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.metrics.stats import percentile

LAG_P99_LIMIT_S = 0.010
CPU_LIMIT_PERCENT = 90.0
LATENESS_P99_LIMIT_S = 0.050
MIN_LATE_LAGS = 3  # lag samples over the limit before the lag p99 counts: one stall is not saturation
BUSY_WAIT_SHARE = 0.5  # of the loop's lag spent waiting for a core: the machine was busy (machine_busy)


def late_lags(lags: Sequence[float]) -> int:
    """How many lag samples exceed LAG_P99_LIMIT_S."""
    return sum(1 for lag in lags if lag > LAG_P99_LIMIT_S)


def client_verdict(lag_p99_s: float | None, cpu_percent: float | None, lateness_p99_s: float | None,
                   late: int | None = None) -> dict:
    """`saturated` = lag p99 > 10 ms (with at least MIN_LATE_LAGS samples over 10 ms, when `late`, their
    count, is known) or CPU > 90 % or send lateness p99 > 50 ms (with the reasons)."""
    reasons = []
    if lag_p99_s is not None and lag_p99_s > LAG_P99_LIMIT_S and (late is None or late >= MIN_LATE_LAGS):
        reasons.append(f"event-loop lag p99 {lag_p99_s * 1e3:.1f} ms > {LAG_P99_LIMIT_S * 1e3:.0f} ms")
    if cpu_percent is not None and cpu_percent > CPU_LIMIT_PERCENT:
        reasons.append(f"client CPU {cpu_percent:.0f}% > {CPU_LIMIT_PERCENT:.0f}%")
    if lateness_p99_s is not None and lateness_p99_s > LATENESS_P99_LIMIT_S:
        reasons.append(f"send lateness p99 {lateness_p99_s * 1e3:.0f} ms > {LATENESS_P99_LIMIT_S * 1e3:.0f} ms")
    return {"loop_lag_p99_s": lag_p99_s, "cpu_percent": cpu_percent, "saturated": bool(reasons),
            "reasons": reasons} | ({} if late is None else {"late_lags": late})


def machine_busy(client: Mapping[str, Any]) -> bool:
    """The client was late for event-loop lag only, and at least BUSY_WAIT_SHARE of its loop's lateness
    (Σ lag, `lag_total_s`) was time the kernel kept it waiting for a core (`runqueue_wait_s`, from
    /proc/self/schedstat): the machine's other processes held the cores, not the client's own work (a loop
    blocked by its own code waits off the run queue)."""
    reasons = client.get("reasons") or []
    wait, lag = client.get("runqueue_wait_s"), client.get("lag_total_s") or 0.0
    lag_only = bool(reasons) and all("event-loop lag" in r for r in reasons)
    return lag_only and wait is not None and bool(lag) and wait >= BUSY_WAIT_SHARE * lag


def saturation_advice(concurrency: int, open_loop: bool, workers: int, cores: int,
                      busy_wait_s: float | None = None) -> str:
    """What would help a saturated client, for its case: a busy machine (`machine_busy`, its loop kept
    waiting `busy_wait_s` for a core) is not helped by more processes; one stream cannot be split over
    processes; an open-loop cell runs in one process; workers on every core but one leave other hosts."""
    if busy_wait_s is not None:
        return (f"other processes kept its loop waiting {busy_wait_s:.1f} s for a core: more --workers will not "
                "help; free this machine or run loadgen on a quieter host")
    if open_loop:
        return ("open-loop cells run in one process: lower the rate, or split it over hosts with --shard i/N "
                "and loadgen merge")
    if concurrency <= 1:
        return ("one stream cannot be split over --workers: free this machine's CPU (other processes) or run "
                "loadgen on a quieter host")
    if workers > 1 and workers >= max(1, cores - 1):
        return (f"--workers {workers} already use every core but one: run shards on more hosts (--shard i/N, "
                "loadgen merge)")
    if workers > 1:
        return f"raise --workers (now {workers}; this machine has {cores} cores)"
    return "add --workers auto (client processes share the load)"


def pooled_lag_p99_s(blocks: Sequence[Mapping[str, Any]]) -> float | None:
    """Lag p99 over several processes = the larger of the p99 over the pooled raw samples of the blocks that
    kept them (`lags`) and the own p99 of each block that did not (never an average of p99s)."""
    pooled = [lag for b in blocks if "lags" in b for lag in b["lags"]]
    own = [b.get("loop_lag_p99_s") for b in blocks if "lags" not in b]
    return max([x for x in (percentile(pooled, 99), *own) if x is not None], default=None)


def combine(parts: Sequence[tuple[str, Mapping[str, Any]]]) -> dict:
    """The client block over several processes, from (label, block) pairs.

    loop_lag_p99_s: `pooled_lag_p99_s`; cpu_percent: the busiest process's; cpu_percent_total: their sum
    (None when no process reported CPU); reasons: every block's, prefixed with its label; saturated when
    any block was or gave a reason, the lag p99 > 10 ms over at least MIN_LATE_LAGS late samples (pooled), or
    any process's CPU > 90 %."""
    blocks = [b for _, b in parts]
    p99 = pooled_lag_p99_s(blocks)
    cpus = [b["cpu_percent"] for b in blocks if b.get("cpu_percent") is not None]
    reasons = [f"{label}: {r}" for label, b in parts for r in b.get("reasons", [])]
    late = sum(late_lags(b["lags"]) if "lags" in b else b.get("late_lags", MIN_LATE_LAGS) for b in blocks)
    lagging = p99 is not None and p99 > LAG_P99_LIMIT_S and late >= MIN_LATE_LAGS
    saturated = (any(b.get("saturated") for b in blocks) or bool(reasons) or lagging
                 or any(c > CPU_LIMIT_PERCENT for c in cpus))
    return {"loop_lag_p99_s": p99, "cpu_percent": max(cpus) if cpus else None,
            "cpu_percent_total": float(sum(cpus)) if cpus else None, "saturated": saturated, "reasons": reasons}


def merge_client(parent: Mapping[str, Any] | None, workers: Sequence[Mapping[str, Any]]) -> dict:
    """The cell's `client` block over the parent process and its workers (`combine`), with the parent's
    other fields, the worker count and each worker's own figures."""
    parts = ([("parent", parent)] if parent else []) + [(f"worker {w['worker']}", w) for w in workers]
    return dict(parent or {}) | combine(parts) | {
        "workers": len(workers),
        "per_worker": [{k: w.get(k) for k in ("worker", "slots", "loop_lag_p99_s", "cpu_percent", "saturated")}
                       for w in workers],
    }


def saturation_note(client: Mapping[str, Any], cell: dict) -> str:
    """The note of a cell whose client fell behind, with the advice for its case (`saturation_advice`):
    'CLIENT SATURATED (event-loop lag …): add --workers auto …'. `cell` holds the key (concurrency,
    request_rate)."""
    advice = saturation_advice(int(cell.get("concurrency") or 0), cell.get("request_rate") is not None,
                               int(client.get("workers") or 1), os.cpu_count() or 1,
                               client["runqueue_wait_s"] if machine_busy(client) else None)
    return "CLIENT SATURATED (" + "; ".join(client.get("reasons", [])) + "): " + advice

