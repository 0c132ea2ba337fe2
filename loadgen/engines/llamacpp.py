"""llama.cpp's llama-server: everything loadgen knows of it.

Recognised by any of: the `Server: llama.cpp` response header, `owned_by: "llamacpp"` in `/v1/models`, or a
`/props` answer with `build_info` and `default_generation_settings` (the shape no other engine serves).
Its server info is assembled from what it serves and what it was launched with:
- `/v1/models` `meta` (n_ctx per slot, n_ctx_train, vocabulary, parameter count, file type);
- `/props`: build, model path and alias, parallel slots (`total_slots`), the chat template;
- `/slots`: whether the slots speculate (`speculative`);
- the command line of the local process (`LAUNCH`): draft model, draft n_max/n_min/p_min, spec type.
Only settings are kept, never per-start values (the media marker, `is_sleeping`, slot state, timestamps), so
the fingerprint of one configuration is the same after a restart and differs when a draft setting does; how they
were learnt (HOW_KNOWN) is stored but not fingerprinted.
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
    LaunchFlags,
    LogReading,
    Metric,
    MetricRole,
    Probe,
    ResponseField,
    Stage,
    TokenizeRoute,
    TokenizeStyle,
)

SERVER_HEADER = "llama.cpp"
OWNER = "llamacpp"
PROPS_KEPT = ("build_info", "model_path", "model_alias", "model_ftype", "chat_template")
# how the settings were learnt, not what they are: left out of the fingerprint (a proxy may hide the header)
HOW_KNOWN = ("recognised_by", "settings_from", "draft_settings_unknown")
LLAMA_RE = re.compile(r"draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([\d.]+)")
CHAT_COUNT_PATH = "/v1/chat/completions/input_tokens"
TEMPLATE_PATH = "/apply-template"
# llama-server does not serve its speculative settings over HTTP: they are read from its local process.
# setting -> (flags, environment variables), every spelling the llama.cpp versions have used
LAUNCH = LaunchFlags(
    settings={
        "speculative_draft_model_path": (("-md", "--model-draft", "--spec-draft-model"),
                                         ("LLAMA_ARG_SPEC_DRAFT_MODEL", "LLAMA_ARG_MODEL_DRAFT")),
        "speculative_draft_n_max": (("--spec-draft-n-max", "--draft", "--draft-n", "--draft-max"),
                                    ("LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_DRAFT_MAX")),
        "speculative_draft_n_min": (("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
                                    ("LLAMA_ARG_SPEC_DRAFT_N_MIN", "LLAMA_ARG_DRAFT_MIN")),
        "speculative_draft_p_min": (("--spec-draft-p-min", "--draft-p-min"),
                                    ("LLAMA_ARG_SPEC_DRAFT_P_MIN", "LLAMA_ARG_DRAFT_P_MIN")),
        "speculative_type": (("--spec-type",), ("LLAMA_ARG_SPEC_TYPE",)),
        "speculative_draft_context": (("-cd", "--ctx-size-draft"), ("LLAMA_ARG_CTX_SIZE_DRAFT",)),
        "parallel_slots": (("-np", "--parallel"), ("LLAMA_ARG_N_PARALLEL",)),
        "context_size_total": (("-c", "--ctx-size"), ("LLAMA_ARG_CTX_SIZE",)),
        "model_path": (("-m", "--model"), ("LLAMA_ARG_MODEL",)),
    },
    numeric=frozenset({"speculative_draft_n_max", "speculative_draft_n_min", "speculative_draft_p_min",
                       "speculative_draft_context", "parallel_slots", "context_size_total"}),
    env_prefix="LLAMA_ARG_", program_mark="llama", server_name="llama-server")
# llama-server (--metrics) keeps vLLM's names and meaning, moved when a request completes
METRICS = (
    Metric(MetricRole.DRAFTS, "llamacpp:spec_decode_num_drafts_total",
           "verify steps that carried drafts; accept length = 1 + Δaccepted / Δdrafts"),
    Metric(MetricRole.DRAFT_TOKENS, "llamacpp:spec_decode_num_draft_tokens_total", "draft tokens proposed"),
    Metric(MetricRole.ACCEPTED_TOKENS, "llamacpp:spec_decode_num_accepted_tokens_total",
           "draft tokens accepted; accept rate = Δaccepted / Δdraft_tokens"),
)
RESPONSE_FIELDS = (
    ResponseField("timings.draft_n", "draft tokens proposed for the request (no verify step count)"),
    ResponseField("timings.draft_n_accepted", "draft tokens accepted for the request"),
    ResponseField("timings.predicted_n", "output tokens, where `usage` is absent"),
    ResponseField("timings.cache_n", "prompt tokens served from the slot's cache"),
    ResponseField("usage.prompt_tokens_details.cached_tokens", "the same as `timings.cache_n`"),
)


def read_timings(t: Json) -> EventCounts | None:
    """llama-server's per-request `timings` (on its finish chunk, beside `usage` or in its place): output tokens
    `predicted_n`, prompt tokens `prompt_n` + `cache_n` (`prompt_n` counts only those evaluated), cached
    `cache_n`, and the draft tokens (`draft_n` proposed, `draft_n_accepted` accepted) as the request's spec."""
    if not isinstance(t, dict):
        return None
    predicted, prompt, cache, drafted = t.get("predicted_n"), t.get("prompt_n"), t.get("cache_n"), t.get("draft_n")
    accepted = int(t.get("draft_n_accepted") or 0) if drafted is not None else 0
    return EventCounts(
        prompt_tokens=None if prompt is None else int(prompt) + int(cache or 0),
        completion_tokens=None if predicted is None else int(predicted),
        cached_tokens=None if cache is None else int(cache),
        spec=None if drafted is None else {"draft_n": int(drafted), "draft_n_accepted": accepted})


TIMINGS = FieldReader("timings", read_timings, on_chunks=True)


def recognised_by(models: Json, server_header: str | None) -> list[str]:
    """Which of llama-server's marks a `/v1/models` answer carries (empty: not llama.cpp by these)."""
    marks = []
    if server_header and server_header.strip().lower().startswith(SERVER_HEADER):
        marks.append("Server header")
    entries = (models or {}).get("data") if isinstance(models, dict) else None
    if any(isinstance(m, dict) and m.get("owned_by") == OWNER for m in entries or []):
        marks.append("owned_by")
    return marks


def is_props(props: Json) -> bool:
    return isinstance(props, dict) and "build_info" in props and "default_generation_settings" in props


def model_meta(models: Json, model: str) -> dict[str, Any]:
    """The `meta` object of `model` in a llama-server `/v1/models` answer ({} when absent)."""
    for m in (models or {}).get("data", []) if isinstance(models, dict) else []:
        if isinstance(m, dict) and m.get("id") == model and isinstance(m.get("meta"), dict):
            meta: dict[str, Any] = m["meta"]
            return meta
    return {}


def context_per_slot(meta: dict[str, Any], props: Json) -> int | None:
    """Tokens one request may hold: `/v1/models` meta.n_ctx, else `/props` default_generation_settings.n_ctx."""
    n_ctx = meta.get("n_ctx")
    if not n_ctx and isinstance(props, dict):
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
    return int(n_ctx) if isinstance(n_ctx, int | float) and n_ctx > 0 else None


def _slot_settings(slots: Json) -> dict[str, Any]:
    if not isinstance(slots, list) or not slots:
        return {}
    # a slot's `params` (with its speculative types) exist only once it has served a task: not a setting
    return {"speculative": any(bool(s.get("speculative")) for s in slots if isinstance(s, dict))}


def server_info(meta: dict[str, Any], props: Json, slots: Json, launch: dict[str, Any] | None,
                marks: list[str], launch_unknown: str | None = None) -> dict[str, Any]:
    """The settings of one llama-server, flat where a sweep's `expect` or a comparison reads them (pure).
    `launch_unknown` says why the launch settings (`launch`) could not be read."""
    props = props if isinstance(props, dict) else {}
    info: dict[str, Any] = {k: props[k] for k in PROPS_KEPT if props.get(k) not in (None, "")}
    sources = [name for name, there in (("/v1/models", meta), ("/props", props), ("/slots", slots)) if there]
    info.update(launch or {})  # what the server was started with; what it serves overrides below
    if launch is not None:
        sources.append("process command line")
    elif launch_unknown:
        info["draft_settings_unknown"] = launch_unknown
    if props.get("total_slots"):
        info["parallel_slots"] = int(props["total_slots"])
    context = context_per_slot(meta, props)
    if context:
        info["context_length"] = context
    if meta:
        info["model_meta"] = {k: v for k, v in meta.items() if k != "n_ctx"}
    info.update(_slot_settings(slots))
    info["recognised_by"] = marks
    info["settings_from"] = sources
    return info


def parse_llama_line(line: str) -> tuple[float, int] | None:
    """(mean len, verify steps) of a `draft acceptance` line; None for any other line.

    `mean len` = 1 + accepted / verify steps of that request, so its verify steps are s = round(accepted /
    (mean len − 1)); a line with no accepted drafts (mean len 1) weighs its generated draft tokens, an upper
    bound of its verify steps."""
    m = LLAMA_RE.search(line)
    if not m:
        return None
    accepted, generated, mean_len = int(m.group(1)), int(m.group(2)), float(m.group(3))
    if mean_len > 1.0 and accepted:
        return mean_len, max(1, round(accepted / (mean_len - 1.0)))
    return 1.0, max(1, generated)


async def read_props(probe: Probe) -> dict[str, Any] | None:
    status, props = await probe.get_json("/props")
    return props if status == 200 and is_props(props) else None


class LlamaCpp(EngineAdapter):
    name = "llamacpp"
    title = "llama.cpp"
    stages = (Stage.MARKS, Stage.SHAPE)
    recognised_by = ("the `Server: llama.cpp` response header or `owned_by: \"llamacpp\"` on `/v1/models`",
                     "a `/props` answer with `build_info` and `default_generation_settings`",
                     "`llamacpp:` metric names")
    metric_prefix = "llamacpp:"
    metrics = METRICS
    spec_keys = ("speculative_draft_model_path", "speculative_type", "speculative_draft_n_max",
                 "speculative_draft_n_min", "speculative_draft_p_min")
    speed_keys = ("parallel_slots", "model_ftype", "build_info")
    volatile_keys = HOW_KNOWN
    volatile_prefixes = ("last_",)
    tokenize = (
        TokenizeRoute("/tokenize", TokenizeStyle.TOKENS, "the text, BOS included with `add_special: true`"),
        TokenizeRoute(CHAT_COUNT_PATH, TokenizeStyle.INPUT_TOKENS, "a whole chat request `{model, messages}` → "
                      "`input_tokens`, template and special tokens included"),
        TokenizeRoute(TEMPLATE_PATH, TokenizeStyle.TEMPLATE, "`{messages}` → the rendered `prompt`, then counted "
                      "by `/tokenize` (builds without input_tokens)"),
    )
    response_fields = RESPONSE_FIELDS
    field_readers = (TIMINGS,)
    launch: LaunchFlags | None = LAUNCH
    metrics_switch = "llama-server with --metrics"
    log_line = "llama.cpp 'draft acceptance … mean len' line (one per request)"

    async def detect(self, probe: Probe, stage: Stage) -> Detection | None:
        if stage is Stage.MARKS:
            marks, props = recognised_by(probe.models, probe.server_header), None
        elif stage is Stage.SHAPE:  # llama-server behind a proxy that hides its marks
            props = await read_props(probe)
            marks = ["/props"] if props else []
        else:
            return None
        if not marks:
            return None
        info = await self.server_info(probe, probe.model, marks, props)
        return Detection(info, info.get("context_length"))

    async def server_info(self, probe: Probe, model: str, marks: list[str],
                          props: dict[str, Any] | None = None) -> dict[str, Any]:
        """The server info of the llama-server at `probe` (reads /props unless given, /slots, the command line)."""
        props = props if props is not None else await read_props(probe)
        status, slots = await probe.get_json("/slots")
        launch, unknown = probe.local_launch(LAUNCH)
        return server_info(model_meta(probe.models, model), props, slots if status == 200 else None, launch,
                           marks, unknown)

    async def identity(self, probe: Probe) -> dict[str, Any] | None:
        for stage in (Stage.MARKS, Stage.SHAPE):
            found = await self.detect(probe, stage)
            if found is not None:
                return found.server_info
        return None

    def parse_log_line(self, line: str) -> LogReading | None:
        parsed = parse_llama_line(line)
        return None if parsed is None else LogReading(parsed[0], parsed[1], "verify_steps")


ADAPTER = LlamaCpp()
