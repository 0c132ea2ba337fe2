"""Hugging Face Text Generation Inference (TGI): what loadgen knows of it, from its public docs.

Recognised by `/info` answering an object with `model_id`, `max_total_tokens` and `version` (the router's
settings: its whole server info), or by `tgi_` metric names. Its context limit is `max_total_tokens` (prompt
and output together). It exports its queue (`tgi_queue_size`) and its batch (`tgi_batch_current_size`), and no
speculative-decoding counter (`tgi_request_skipped_tokens` is a histogram of speculated tokens per request,
not an accept count), so its accept length comes from the stream's chunks only. Its `/tokenize` takes
`{inputs}` and answers a list of tokens, a shape loadgen does not count with: prompt lengths are estimated.
"""

from __future__ import annotations

from loadgen.engines.base import Detection, EngineAdapter, Metric, MetricRole, Probe, Stage

NEEDED = ("model_id", "max_total_tokens", "version")


class TGI(EngineAdapter):
    name = "tgi"
    title = "TGI"
    stages = (Stage.ROUTE,)
    recognised_by = ("`/info` answers 200 with `model_id`, `max_total_tokens` and `version`",
                     "`tgi_` metric names")
    metric_prefix = "tgi_"
    metrics = (
        Metric(MetricRole.RUNNING, "tgi_batch_current_size", "requests in the batch being decoded"),
        Metric(MetricRole.QUEUED, "tgi_queue_size", "requests waiting for a batch"),
    )
    identity_routes = ("/info",)

    async def detect(self, probe: Probe, stage: Stage) -> Detection | None:
        if stage is not Stage.ROUTE:
            return None
        status, info = await probe.get_json("/info")
        if status == 200 and isinstance(info, dict) and all(k in info for k in NEEDED):
            total = info.get("max_total_tokens")
            return Detection(info, int(total) if isinstance(total, int) and total > 0 else None)
        return None


ADAPTER = TGI()
