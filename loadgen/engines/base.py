"""What every engine adapter says about its server, and the one object it may ask the server through.

An adapter (`EngineAdapter`) holds everything loadgen knows of one engine: how it is recognised (`detect`, in
detection stages), what its settings are (`spec_settings`, `stable_info` for the fingerprint), the flags it is
launched with (`launch`), its Prometheus metric names by role (`metrics`), the log line that gives an accept
length (`parse_log_line`), its tokenize routes (`tokenize`) and the fields of its answers beside OpenAI's
(`response_fields`, read into `EventCounts` by its `field_readers`). It sends nothing itself: detection asks
through a `Probe`, which target/discover.py implements over HTTP, so an adapter is pure facts and pure parsing,
tested with tables of answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any, Protocol

Json = Any  # a parsed JSON answer: dict, list, str, number, bool or None


class Stage(IntEnum):
    """When a detection step runs: every adapter's step of one stage before any step of the next."""

    MARKS = 1  # what the /v1/models answer already shows (a header, `owned_by`): no request of its own
    ROUTE = 2  # an info route of the engine's own (/server_info, /version, /info)
    SHAPE = 3  # an answer only this engine gives, for a server whose marks a proxy hides


class Probe(Protocol):
    """The server as detection sees it: the /v1/models answer, and GETs of other routes."""

    @property
    def url(self) -> str: ...

    @property
    def models(self) -> Json: ...

    @property
    def model(self) -> str:
        """The model to be measured (the first one served when none was named)."""
        ...

    @property
    def server_header(self) -> str | None: ...

    async def get_json(self, path: str) -> tuple[int | None, Json]:
        """(status, parsed JSON or None) of GET `path`; (None, None) when the server cannot be reached."""
        ...

    def local_launch(self, launch: LaunchFlags) -> tuple[dict[str, Any] | None, str | None]:
        """(the settings of `launch` read from the local process serving the target, None) or (None, why not)."""
        ...


@dataclass(frozen=True)
class Detection:
    """What a detection step learnt: the server info stored with every result, and a context limit."""

    server_info: dict[str, Any]
    context_length: int | None = None  # tokens one request may hold, when the info says so


class MetricRole(StrEnum):
    """What a metric of the server's /metrics tells loadgen."""

    GENERATED_TOKENS = "generated_tokens"  # counter: output tokens, moved when a request completes
    VERIFY_STEPS = "verify_steps"  # counter: speculative verify steps (accept length = Δgenerated / Δthis)
    DRAFTS = "drafts"  # counter: verify steps that carried drafts (accept length = 1 + Δaccepted / Δthis)
    DRAFT_TOKENS = "draft_tokens"  # counter: draft tokens proposed
    ACCEPTED_TOKENS = "accepted_tokens"  # counter: draft tokens accepted
    ACCEPTED_PER_POSITION = "accepted_per_position"  # counter labelled `position`: accepted at each draft slot
    ACCEPT_LENGTH = "accept_length"  # gauge: the scheduler's recent mean accept length
    RUNNING = "running"  # gauge: requests being decoded
    QUEUED = "queued"  # gauge: requests waiting for a slot
    ABORTED = "aborted"  # counter: requests the server stopped because the client went away
    # read by the dashboards only (grafana/generate.py), beside the client's own figures
    REQUESTS = "requests"  # counter: requests finished
    SERVER_TTFT = "server_ttft"  # histogram (seconds): time to first token as the server measures it
    SERVER_ITL = "server_itl"  # histogram (seconds): inter-token latency as the server measures it
    SERVER_E2E = "server_e2e"  # histogram (seconds): request latency as the server measures it
    QUEUE_TIME = "queue_time"  # histogram (seconds): time a request waited for the scheduler
    KV_USAGE = "kv_usage"  # gauge: the share of the KV-cache pool in use
    CACHE_HIT_RATE = "cache_hit_rate"  # gauge: the share of prompt tokens served from the prefix cache
    DRAFT_BUDGET = "draft_budget"  # gauge: draft tokens a verify step carries
    THROUGHPUT = "throughput"  # gauge: the scheduler's recent output tokens per second


COUNTER_ROLES = frozenset({MetricRole.GENERATED_TOKENS, MetricRole.VERIFY_STEPS, MetricRole.DRAFTS,
                           MetricRole.DRAFT_TOKENS, MetricRole.ACCEPTED_TOKENS, MetricRole.ABORTED})


@dataclass(frozen=True)
class Metric:
    """One metric name of an engine, the role loadgen reads it in, and what it means."""

    role: MetricRole
    name: str
    meaning: str
    absent: str = ""  # why a server of this engine may not export it, for the message that says so


@dataclass(frozen=True)
class LogReading:
    """One log line's accept length and its weight in the cell's mean (None: the line has none, weight 1)."""

    accept_length: float
    weight: int | None
    weighted_by: str  # what the weight counts: "running_req" or "verify_steps"


class TokenizeStyle(StrEnum):
    """How a tokenize route is asked and what it answers (workload/tokenizers.py speaks each)."""

    COUNT = "count"  # {model, prompt} (a prompt or a list) → {count, max_model_len}
    TOKENS = "tokens"  # {content, add_special} → {tokens: [...]}
    INPUT_TOKENS = "input_tokens"  # {model, messages} → {input_tokens}: a whole chat request
    TEMPLATE = "template"  # {messages} → {prompt}: the chat request rendered, to be counted by TOKENS


@dataclass(frozen=True)
class TokenizeRoute:
    """A route that counts tokens with the server's own tokenizer (or renders what is then counted)."""

    path: str
    style: TokenizeStyle
    counts: str  # what is counted, for the docs


@dataclass(frozen=True)
class ResponseField:
    """A field of the engine's answers that the client reads for speculative decoding or token counts."""

    path: str  # dotted, from the answer's root (a chunk, an event)
    meaning: str


@dataclass(slots=True)
class EventCounts:
    """What an engine's own field of one answer event says of its request; None where it says nothing. The
    token counts are the request's so far; `spec` is its speculative-decoding details as the engine names them
    (records keep them so: metrics read `draft_n`, `spec_verify_ct`, ... from there)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    spec: dict[str, Any] | None = None


@dataclass(frozen=True)
class FieldReader:
    """An engine's field at the root of an OpenAI-route event, beside `usage`, and the function that reads its
    value (None: nothing the client keeps). The client reads it only in events that are not plain content
    chunks: events without choices and, for a field `on_chunks`, chunks that carry it or `usage`."""

    key: str
    read: Callable[[Json], EventCounts | None]
    # the field may ride on a chunk with choices, which it then makes a counted event whose counts are the
    # request's totals (llama.cpp's `timings` on its finish chunk); else it comes in an event of its own
    on_chunks: bool = False


@dataclass(frozen=True)
class LaunchFlags:
    """Settings an engine does not serve over HTTP, read from its process: setting → (flags, variables)."""

    settings: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    numeric: frozenset[str]
    env_prefix: str  # the environment variables the engine reads (only these are looked at)
    program_mark: str  # a part of the program's name that says the process is the engine, not a proxy
    server_name: str  # the program, in messages
    keys: tuple[str, ...] = field(default=())  # the settings' keys, in the docs' order


class EngineAdapter:
    """Base of every adapter: an engine that offers nothing of its own (each adapter overrides what it has)."""

    name = "openai"  # the engine's name in results and on the console
    title = "OpenAI-compatible server"
    stages: tuple[Stage, ...] = ()  # the stages `detect` has a step in (the registry asks it in no other)
    recognised_by: tuple[str, ...] = ()  # how `detect` knows it, in its order, for the docs
    metric_prefix: str | None = None  # the prefix of its metric names, the last detection step
    metrics: tuple[Metric, ...] = ()
    spec_keys: tuple[str, ...] = ()  # the server-info keys that are speculative-decoding settings
    # server-info keys of settings beyond the speculative ones that change the server's speed (CUDA graphs,
    # scheduling, parallelism, quantisation): named as confounders when they differ between compared configurations
    speed_keys: tuple[str, ...] = ()
    volatile_keys: tuple[str, ...] = ()  # server-info keys left out of the fingerprint
    volatile_prefixes: tuple[str, ...] = ()
    identity_routes: tuple[str, ...] = ()  # routes whose whole answer is the server's settings
    tokenize: tuple[TokenizeRoute, ...] = ()
    response_fields: tuple[ResponseField, ...] = ()
    field_readers: tuple[FieldReader, ...] = ()  # how the `response_fields` outside `usage` are read
    launch: LaunchFlags | None = None
    log_line: str | None = None  # the log line an accept length is read from, as it is named in messages
    metrics_switch: str | None = None  # how the server is started with its /metrics, when it is off by default

    async def detect(self, probe: Probe, stage: Stage) -> Detection | None:
        """The server info when the server at `probe` is this engine by the step of `stage`; else None."""
        return None

    async def identity(self, probe: Probe) -> dict[str, Any] | None:
        """The server info for a sweep's `expect` map when the engine has no `identity_routes`; else None."""
        return None

    def parse_log_line(self, line: str) -> LogReading | None:
        """The accept length a line of the server's log gives; None for any other line."""
        return None

    def metric(self, role: MetricRole) -> str | None:
        """The name of this engine's metric in `role`, or None when it exports none."""
        return next((m.name for m in self.metrics if m.role is role), None)

    def spec_settings(self, info: dict[str, Any]) -> dict[str, Any]:
        """The speculative-decoding settings in a server info (keys in `spec_keys` order, None left out)."""
        return {k: info[k] for k in self.spec_keys if info.get(k) is not None}

    def stable_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """The server info without what changes between two starts of one configuration (fingerprinted)."""
        return {k: v for k, v in info.items()
                if k not in self.volatile_keys and not k.startswith(self.volatile_prefixes)}
