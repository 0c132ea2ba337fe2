"""SGLang, vLLM and llama.cpp metric names, and one `/metrics` scrape reduced to the totals the accept-length source uses.

Pure functions over `promtext.Sample` lists, so they are tested with tables of exposition lines:

- `counter_totals`: each speculative-decoding counter summed over its label sets (DP ranks, is_streaming, ...).
- `gauge_values`: the scheduler gauges, one reading per DP group (TP/PP/EP ranks repeat their group's value),
  queue gauges summed over groups, the accept-length gauge averaged over groups weighted by running requests.
"""

from __future__ import annotations

from loadgen.telemetry.promtext import Sample

SG_GEN = "sglang:generation_tokens_total"
SG_VERIFY = "sglang:spec_verify_calls_total"
SG_GAUGE = "sglang:spec_accept_length"
SG_RUNNING = "sglang:num_running_reqs"
SG_QUEUE = "sglang:num_queue_reqs"
SG_ABORTED = "sglang:num_aborted_requests_total"  # requests the server stopped because the client went away
VL_DRAFTS = "vllm:spec_decode_num_drafts_total"
VL_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VL_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VL_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"  # labelled `position`, from 0
VL_RUNNING = "vllm:num_requests_running"
VL_QUEUE = "vllm:num_requests_waiting"
# llama.cpp's llama-server (--metrics) keeps vLLM's names and meaning, moved when a request completes
LC_DRAFTS = "llamacpp:spec_decode_num_drafts_total"
LC_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
LC_ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"
# engine → (verify steps, draft tokens proposed, draft tokens accepted): accept length = 1 + Δaccepted / Δdrafts
DRAFT_COUNTERS = {"vllm": (VL_DRAFTS, VL_DRAFT_TOKENS, VL_ACCEPTED), "llamacpp": (LC_DRAFTS, LC_DRAFT_TOKENS, LC_ACCEPTED)}
COUNTERS = (SG_GEN, SG_VERIFY, SG_ABORTED, VL_DRAFTS, VL_DRAFT_TOKENS, VL_ACCEPTED, LC_DRAFTS, LC_DRAFT_TOKENS, LC_ACCEPTED)
QUEUE_GAUGES = (SG_RUNNING, SG_QUEUE, VL_RUNNING, VL_QUEUE)
GAUGES = (SG_GAUGE, *QUEUE_GAUGES)
# What a scrape keeps: everything else in the answer is not parsed. Counters may be served without `_total`.
WANTED = frozenset((*COUNTERS, VL_PER_POS)) | frozenset(GAUGES) | \
    frozenset(n[: -len("_total")] for n in (*COUNTERS, VL_PER_POS))
# Per-rank copies of one scheduler's gauges: with --enable-metrics-for-all-schedulers every TP/PP/EP rank of
# a DP group reports the same value, so one reading per group (the lowest rank) is kept; DP groups (told
# apart by dp_rank and any other label) are then summed.
_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")


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
    """vLLM's accepted tokens per draft position: position → Σ over its other label sets (engines, models)."""
    totals: dict[int, float] = {}
    for s in samples:
        if s.name in (VL_PER_POS, VL_PER_POS[: -len("_total")]) and s.labels.get("position", "").isdigit():
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
    """Queue gauges summed over DP groups; the accept-length gauge averaged over DP groups, weighted by each
    group's running requests (a plain mean when none is running)."""
    rows = one_per_group([s for s in samples if s.name in GAUGES])
    out = {}
    for name in QUEUE_GAUGES:
        vals = [s.value for s in rows if s.name == name]
        if vals:
            out[name] = sum(vals)
    accept = [s for s in rows if s.name == SG_GAUGE]
    if accept:
        running = {_group(s)[1]: s.value for s in rows if s.name == SG_RUNNING}
        weights = [running.get(_group(s)[1], 0.0) for s in accept]
        if sum(weights) > 0:
            out[SG_GAUGE] = sum(s.value * w for s, w in zip(accept, weights)) / sum(weights)
        else:
            out[SG_GAUGE] = sum(s.value for s in accept) / len(accept)
    return out
