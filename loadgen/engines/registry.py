"""The engine adapters in detection order, and what the engine-neutral code asks of all of them at once.

Detection runs stage by stage (`Stage`): every adapter's step of a stage, in `ADAPTERS` order, before any
step of the next; then the metric-name prefixes of `/metrics`; a server no step recognises is the fallback,
`openai_generic`. A new engine is one module with an `ADAPTER` and one line here.
"""

from __future__ import annotations

from loadgen.engines import llamacpp, openai_generic, sglang, tgi, vllm
from loadgen.engines.base import (
    COUNTER_ROLES,
    Detection,
    EngineAdapter,
    FieldReader,
    LogReading,
    MetricRole,
    Probe,
    Stage,
    TokenizeStyle,
)

ADAPTERS: tuple[EngineAdapter, ...] = (sglang.ADAPTER, vllm.ADAPTER, llamacpp.ADAPTER, tgi.ADAPTER)
FALLBACK: EngineAdapter = openai_generic.ADAPTER
BY_NAME = {a.name: a for a in (*ADAPTERS, FALLBACK)}
# The engines' fields of OpenAI-route events (beside `usage`), in registry order, and those that may ride on a
# chunk with choices. The client tests every chunk it parses for the latter with one key lookup (`CHUNK_FIELD`),
# so at most one engine may have one: a second would need a set test there, on every chunk.
FIELD_READERS: tuple[FieldReader, ...] = tuple(r for a in ADAPTERS for r in a.field_readers)
CHUNK_READERS: tuple[FieldReader, ...] = tuple(r for r in FIELD_READERS if r.on_chunks)
if len(CHUNK_READERS) > 1:
    raise RuntimeError(f"more than one engine field rides on chunks: {[r.key for r in CHUNK_READERS]}")
CHUNK_FIELD: str | None = CHUNK_READERS[0].key if CHUNK_READERS else None


def adapter(name: str) -> EngineAdapter:
    """The adapter of the engine called `name` in a target or a results file; the fallback for any other."""
    return BY_NAME.get(name, FALLBACK)


async def detect(probe: Probe) -> tuple[EngineAdapter, Detection] | None:
    """The first adapter whose step recognises the server, stage by stage; None when none does (the caller
    then looks at the metric names)."""
    for stage in Stage:
        for a in (a for a in ADAPTERS if stage in a.stages):
            found = await a.detect(probe, stage)
            if found is not None:
                return a, found
    return None


def engine_from_metrics(text: str) -> EngineAdapter | None:
    """The adapter whose metric prefix starts the first sample line that has one; None otherwise."""
    prefixes = [(a.metric_prefix, a) for a in ADAPTERS if a.metric_prefix]
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        for prefix, a in prefixes:
            if line.startswith(prefix):
                return a
    return None


def parse_log_line(line: str) -> LogReading | None:
    """The accept length of a log line of any engine; None for a line no adapter reads."""
    for a in ADAPTERS:
        reading = a.parse_log_line(line)
        if reading is not None:
            return reading
    return None


def metric_names(role: MetricRole) -> tuple[str, ...]:
    """Every adapter's metric in `role`, in registry order."""
    return tuple(name for a in ADAPTERS if (name := a.metric(role)) is not None)


def draft_counting() -> tuple[str, ...]:
    """The engines that count their drafts (a drafts and an accepted-tokens metric), in registry order: the
    server-metrics source writes their counts under the engine's name (`drafts`, `accepted_tokens` and, where
    the engine exports them, `accepted_per_position`)."""
    return tuple(a.name for a in ADAPTERS
                 if a.metric(MetricRole.DRAFTS) is not None and a.metric(MetricRole.ACCEPTED_TOKENS) is not None)


def counter_names() -> tuple[str, ...]:
    """Every counter loadgen reads, of any engine."""
    return tuple(m.name for a in ADAPTERS for m in a.metrics if m.role in COUNTER_ROLES)


def count_routes() -> tuple[str, ...]:
    """The `{model, prompt} → {count}` tokenize routes discovery tries, in registry order."""
    routes = [r.path for a in ADAPTERS for r in a.tokenize if r.style is TokenizeStyle.COUNT]
    return tuple(dict.fromkeys(routes))


def tokens_routes() -> tuple[tuple[EngineAdapter, str], ...]:
    """(adapter, path) of each `{content} → {tokens}` tokenize route, tried when no count route answered."""
    return tuple((a, r.path) for a in ADAPTERS for r in a.tokenize if r.style is TokenizeStyle.TOKENS)


def route_of(a: EngineAdapter, style: TokenizeStyle) -> str | None:
    """The path of `a`'s tokenize route of `style`, or None."""
    return next((r.path for r in a.tokenize if r.style is style), None)


def identity_routes() -> tuple[str, ...]:
    """The routes whose answer is the server's settings (a sweep's `expect` map is matched against it)."""
    return tuple(dict.fromkeys(p for a in ADAPTERS for p in a.identity_routes))


def log_lines() -> tuple[str, ...]:
    """The log lines an accept length is read from, as messages name them."""
    return tuple(a.log_line for a in ADAPTERS if a.log_line)


def metrics_switches() -> str:
    """How to start the servers whose /metrics is off by default: "A with --x (B with --y)"."""
    switches = [a.metrics_switch for a in ADAPTERS if a.metrics_switch]
    return switches[0] + (f" ({', '.join(switches[1:])})" if len(switches) > 1 else "") if switches else ""
