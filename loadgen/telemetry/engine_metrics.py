"""The engines' metric names, gathered from their adapters, and one `/metrics` scrape reduced to the totals the
accept-length source uses.

Which metric means what is each adapter's (`EngineAdapter.metrics`, by `MetricRole`); here are the
engine-neutral reductions, pure functions over `promtext.Sample` lists, tested with tables of exposition lines:

- `counter_totals`: each counter summed over its label sets (DP ranks, is_streaming, ...).
- `gauge_values`: the scheduler gauges, one reading per DP group (TP/PP/EP ranks repeat their group's value),
  queue gauges summed over groups, an accept-length gauge averaged over groups weighted by running requests.
"""

from __future__ import annotations

from loadgen.engines.base import MetricRole
from loadgen.engines.registry import ADAPTERS, counter_names, metric_names
from loadgen.engines.sglang import ADAPTER as _SGLANG
from loadgen.telemetry.promtext import Sample

# engine → (verify steps, draft tokens proposed, draft tokens accepted): accept length = 1 + Δaccepted / Δdrafts
DRAFT_COUNTERS: dict[str, tuple[str, str | None, str]] = {
    a.name: (drafts, a.metric(MetricRole.DRAFT_TOKENS), accepted) for a in ADAPTERS
    if (drafts := a.metric(MetricRole.DRAFTS)) and (accepted := a.metric(MetricRole.ACCEPTED_TOKENS))}
# engine → (tokens generated, verify steps): accept length = Δgenerated / Δverify
VERIFY_COUNTERS: dict[str, tuple[str, str]] = {
    a.name: (generated, verify) for a in ADAPTERS
    if (generated := a.metric(MetricRole.GENERATED_TOKENS)) and (verify := a.metric(MetricRole.VERIFY_STEPS))}
COUNTERS = counter_names()
ABORTED = metric_names(MetricRole.ABORTED)
PER_POSITION = metric_names(MetricRole.ACCEPTED_PER_POSITION)  # labelled `position`, from 0
QUEUE_GAUGES = tuple(n for a in ADAPTERS for r in (MetricRole.RUNNING, MetricRole.QUEUED) if (n := a.metric(r)))
# the result's key of each queue gauge: its name without the engine's prefix, + "_mean"
QUEUE_KEYS = {n: n.removeprefix(a.metric_prefix or "") + "_mean" for a in ADAPTERS
              for r in (MetricRole.RUNNING, MetricRole.QUEUED) if (n := a.metric(r))}
# accept-length gauge → the running-requests gauge of the same engine, its weight over DP groups
ACCEPT_GAUGES: dict[str, str | None] = {
    g: a.metric(MetricRole.RUNNING) for a in ADAPTERS if (g := a.metric(MetricRole.ACCEPT_LENGTH))}
GAUGES = (*ACCEPT_GAUGES, *QUEUE_GAUGES)
# What a scrape keeps: everything else in the answer is not parsed. Counters may be served without `_total`.
WANTED = frozenset((*COUNTERS, *PER_POSITION)) | frozenset(GAUGES) | \
    frozenset(n[: -len("_total")] for n in (*COUNTERS, *PER_POSITION))
# Per-rank copies of one scheduler's gauges: with --enable-metrics-for-all-schedulers every TP/PP/EP rank of
# a DP group reports the same value, so one reading per group (the lowest rank) is kept; DP groups (told
# apart by dp_rank and any other label) are then summed.
_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
# SGLang's gauges, kept for the callers that read them from this module
SG_GAUGE = _SGLANG.metric(MetricRole.ACCEPT_LENGTH)
SG_RUNNING = _SGLANG.metric(MetricRole.RUNNING)
SG_QUEUE = _SGLANG.metric(MetricRole.QUEUED)


def counter_totals(samples: list[Sample]) -> dict[str, float]:
    """Σ over label sets of each counter in COUNTERS (a name without `_total` counts as the same counter).

    When a counter carries `priority` labels and one of them is "" (SGLang's all-priorities total), only the
    "" series are summed, so the per-priority series are not counted twice."""
    by_name: dict[str, list[Sample]] = {}
    for s in samples:
        name = s.name if s.name.endswith("_total") else s.name + "_total"
        if name in COUNTERS:
            by_name.setdefault(name, []).append(s)
    totals = {}
    for name, rows in by_name.items():
        if any(r.labels.get("priority") == "" for r in rows):
            rows = [r for r in rows if r.labels.get("priority", "") == ""]
        totals[name] = sum(r.value for r in rows)
    return totals


def per_position_totals(samples: list[Sample]) -> dict[int, float]:
    """Accepted tokens per draft position: position → Σ over its other label sets (engines, models)."""
    names = {*PER_POSITION, *(n[: -len("_total")] for n in PER_POSITION)}
    totals: dict[int, float] = {}
    for s in samples:
        if s.name in names and s.labels.get("position", "").isdigit():
            pos = int(s.labels["position"])
            totals[pos] = totals.get(pos, 0.0) + s.value
    return totals


def _group(s: Sample) -> tuple:
    return s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in _RANK_LABELS))


def _rank(s: Sample) -> tuple:
    return tuple(int(s.labels.get(k, "0")) if s.labels.get(k, "0").isdigit() else 0 for k in _RANK_LABELS)


def one_per_group(samples: list[Sample]) -> list[Sample]:
    """The lowest-rank sample of each (name, labels without TP/PP/EP rank) group."""
    best: dict[tuple, Sample] = {}
    for s in samples:
        g = _group(s)
        if g not in best or _rank(s) < _rank(best[g]):
            best[g] = s
    return list(best.values())


def gauge_values(samples: list[Sample]) -> dict[str, float]:
    """Queue gauges summed over DP groups; an accept-length gauge averaged over DP groups, weighted by each
    group's running requests (a plain mean when none is running)."""
    rows = one_per_group([s for s in samples if s.name in GAUGES])
    out = {}
    for name in QUEUE_GAUGES:
        vals = [s.value for s in rows if s.name == name]
        if vals:
            out[name] = sum(vals)
    for gauge, running_name in ACCEPT_GAUGES.items():
        accept = [s for s in rows if s.name == gauge]
        if not accept:
            continue
        running = {_group(s)[1]: s.value for s in rows if s.name == running_name}
        weights = [running.get(_group(s)[1], 0.0) for s in accept]
        if sum(weights) > 0:
            out[gauge] = sum(s.value * w for s, w in zip(accept, weights)) / sum(weights)
        else:
            out[gauge] = sum(s.value for s in accept) / len(accept)
    return out
