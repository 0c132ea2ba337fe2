"""SGLang: everything loadgen knows of it (reference/sglang.md).

Recognised by `/server_info` (or `/get_server_info` on older builds) answering a JSON object: the server's
arguments, which are its server info (secrets blanked by discovery). Accept length per cell: Δgenerated /
Δverify steps from its counters, the time-weighted `spec_accept_length` gauge, or its decode log lines.
"""

from __future__ import annotations

import re
from typing import Any

from loadgen.engines.base import (
    Detection,
    EngineAdapter,
    EventCounts,
    FieldReader,
    Json,
    LogReading,
    Metric,
    MetricRole,
    Probe,
    ResponseField,
    Stage,
    TokenizeRoute,
    TokenizeStyle,
)

ACCEPT_RE = re.compile(r"accept len: ([\d.]+)")
RUNNING_RE = re.compile(r"#running-req: (\d+)")
INFO_ROUTES = ("/server_info", "/get_server_info")


def parse_line(line: str) -> tuple[float, int | None] | None:
    """(accept len, #running-req or None) of a `Decode batch` log line; None for any other line."""
    m = ACCEPT_RE.search(line)
    if not m:
        return None
    try:
        accept = float(m.group(1))
    except ValueError:
        return None
    r = RUNNING_RE.search(line)
    return accept, int(r.group(1)) if r else None


def read_sglext(ext: Json) -> EventCounts | None:
    """`sglext.spec_tokens_details` of a chat/completions stream (an event of its own, without choices): the
    request's speculative details (the first one's when it is a list, one per choice)."""
    details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
    if details is None:
        return None
    return EventCounts(spec=details[0] if isinstance(details, list) else details)


# (prompt tokens, cached tokens, spec) of one `/generate` event; None: not in it. A tuple, not an `EventCounts`:
# it is read from every event of the stream, where building a dataclass costs about a tenth of the event's parse.
GenerateCounts = tuple[int | None, int | None, dict[str, Any] | None]


def read_generate_meta(meta: dict[str, Any]) -> GenerateCounts:
    """The counts of a `/generate` event's `meta_info` beyond its running `completion_tokens` (which the
    stream reads itself): `prompt_tokens`, `cached_tokens` (from the prefix cache), and the `spec_*` fields
    as the request's speculative details when it has `spec_verify_ct`."""
    cached = meta.get("cached_tokens")
    spec = {k: v for k, v in meta.items() if k.startswith("spec_")} if meta.get("spec_verify_ct") is not None \
        else None
    return meta.get("prompt_tokens"), None if cached is None else int(cached), spec


SGLEXT = FieldReader("sglext", read_sglext)
# `/generate`: the object of every event that holds its running `completion_tokens`, `finish_reason` and the
# counts `read_generate_meta` reads
GENERATE_META = "meta_info"


class SGLang(EngineAdapter):
    name = "sglang"
    title = "SGLang"
    stages = (Stage.ROUTE,)
    recognised_by = ("`/server_info` (or `/get_server_info`) answers 200 with an object",
                     "`sglang:` metric names")
    metric_prefix = "sglang:"
    metrics = (
        Metric(MetricRole.GENERATED_TOKENS, "sglang:generation_tokens_total",
               "output tokens, moved when a request completes"),
        Metric(MetricRole.VERIFY_STEPS, "sglang:spec_verify_calls_total",
               "speculative verify steps; accept length = Δgeneration_tokens / Δspec_verify_calls",
               absent="SGLang builds before 2026 lack it"),
        Metric(MetricRole.ACCEPT_LENGTH, "sglang:spec_accept_length",
               "mean accept length over the scheduler's last decode_log_interval decode steps"),
        Metric(MetricRole.RUNNING, "sglang:num_running_reqs", "requests being decoded, per DP group"),
        Metric(MetricRole.QUEUED, "sglang:num_queue_reqs", "requests waiting for the scheduler, per DP group"),
        Metric(MetricRole.ABORTED, "sglang:num_aborted_requests_total",
               "requests the server stopped because their client went away"),
        Metric(MetricRole.REQUESTS, "sglang:num_requests_total", "requests finished, by model_name"),
        Metric(MetricRole.SERVER_TTFT, "sglang:time_to_first_token_seconds",
               "histogram of the server's TTFT; its first bucket is 0.1 s"),
        Metric(MetricRole.SERVER_ITL, "sglang:inter_token_latency_seconds", "histogram of the server's ITL"),
        Metric(MetricRole.SERVER_E2E, "sglang:e2e_request_latency_seconds", "histogram of the server's latency"),
        Metric(MetricRole.QUEUE_TIME, "sglang:queue_time_seconds", "histogram of the time requests queued"),
        Metric(MetricRole.KV_USAGE, "sglang:token_usage", "the share of the KV-cache pool in use"),
        Metric(MetricRole.CACHE_HIT_RATE, "sglang:cache_hit_rate", "the share of prompt tokens the prefix cache served"),
        Metric(MetricRole.DRAFT_BUDGET, "sglang:spec_num_draft_tokens", "draft tokens a verify step carries"),
        Metric(MetricRole.THROUGHPUT, "sglang:gen_throughput", "the scheduler's recent output tokens per second"),
    )
    spec_keys = ("speculative_algorithm", "speculative_ddtree_budget", "speculative_num_draft_tokens",
                 "speculative_eagle_topk", "speculative_dflash_block_size", "speculative_num_steps",
                 "speculative_draft_model_path")
    speed_keys = ("disable_cuda_graph", "cuda_graph_max_bs", "disable_overlap_schedule", "enable_torch_compile",
                  "max_running_requests", "tp_size", "dp_size", "ep_size", "enable_dp_attention", "quantization",
                  "kv_cache_dtype", "dtype", "attention_backend", "chunked_prefill_size", "page_size",
                  "schedule_policy", "stream_interval", "mem_fraction_static")
    volatile_keys = ("internal_states", "sim_started_at")
    volatile_prefixes = ("last_",)
    identity_routes = INFO_ROUTES
    tokenize = (TokenizeRoute("/v1/tokenize", TokenizeStyle.COUNT,
                              "the text; a list of prompts in one call; the chat template's cost (and BOS) is "
                              "measured once by a 1-token probe and subtracted"),)
    response_fields = (
        ResponseField("sglext.spec_tokens_details", "per-request speculative details of a chat/completions "
                      "stream (asked with `return_spec_tokens_details`)"),
        ResponseField("meta_info.spec_verify_ct", "`/generate`: the request's verify steps (with the other "
                      "`meta_info.spec_*` fields)"),
        ResponseField("meta_info.completion_tokens", "`/generate`: cumulative output tokens in every event"),
        ResponseField("meta_info.cached_tokens", "`/generate`: prompt tokens served from the prefix cache"),
    )
    field_readers = (SGLEXT,)
    metrics_switch = "SGLang with --enable-metrics"
    log_line = "'accept len' line (SGLang logs one every decode_log_interval decode steps)"

    async def detect(self, probe: Probe, stage: Stage) -> Detection | None:
        if stage is not Stage.ROUTE:
            return None
        for path in INFO_ROUTES:
            status, info = await probe.get_json(path)
            if status == 200 and isinstance(info, dict):
                context = info.get("context_length")
                return Detection(info, int(context) if context else None)
        return None

    def parse_log_line(self, line: str) -> LogReading | None:
        parsed = parse_line(line)
        return None if parsed is None else LogReading(parsed[0], parsed[1], "running_req")


ADAPTER = SGLang()
