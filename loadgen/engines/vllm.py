"""vLLM: everything loadgen knows of it.

Recognised by `/version` answering an object with `version` (its whole server info), or by `vllm:` metric
names. Accept length per cell: 1 + Δaccepted / Δdrafts from its speculative-decoding counters; it logs no
per-cell accept length and exports no accept-length gauge.
"""

from __future__ import annotations

from loadgen.engines.base import (
    Detection,
    EngineAdapter,
    Metric,
    MetricRole,
    Probe,
    ResponseField,
    Stage,
    TokenizeRoute,
    TokenizeStyle,
)


class VLLM(EngineAdapter):
    name = "vllm"
    title = "vLLM"
    stages = (Stage.ROUTE,)
    recognised_by = ("`/version` answers 200 with `version`", "`vllm:` metric names")
    metric_prefix = "vllm:"
    metrics = (
        Metric(MetricRole.DRAFTS, "vllm:spec_decode_num_drafts_total",
               "verify steps that carried drafts; accept length = 1 + Δaccepted / Δdrafts"),
        Metric(MetricRole.DRAFT_TOKENS, "vllm:spec_decode_num_draft_tokens_total", "draft tokens proposed"),
        Metric(MetricRole.ACCEPTED_TOKENS, "vllm:spec_decode_num_accepted_tokens_total",
               "draft tokens accepted; accept rate = Δaccepted / Δdraft_tokens"),
        Metric(MetricRole.ACCEPTED_PER_POSITION, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
               "draft tokens accepted at each draft `position` (from 0)"),
        Metric(MetricRole.RUNNING, "vllm:num_requests_running", "requests being decoded"),
        Metric(MetricRole.QUEUED, "vllm:num_requests_waiting", "requests waiting for the scheduler"),
    )
    speed_keys = ("enforce_eager", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size", "quantization",
                  "kv_cache_dtype", "version")
    volatile_prefixes = ("last_",)
    tokenize = (TokenizeRoute("/tokenize", TokenizeStyle.COUNT,
                              "as SGLang; `max_model_len` is the context limit when `/v1/models` has none"),)
    response_fields = (
        ResponseField("usage.prompt_tokens_details.cached_tokens",
                      "prompt tokens served from the prefix cache (with `--enable-prompt-tokens-details`)"),
    )

    async def detect(self, probe: Probe, stage: Stage) -> Detection | None:
        if stage is not Stage.ROUTE:
            return None
        status, info = await probe.get_json("/version")
        if status == 200 and isinstance(info, dict) and "version" in info:
            return Detection(info)
        return None


ADAPTER = VLLM()
