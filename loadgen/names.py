"""Every enumerated value loadgen reads or writes, named once (the lowest layer: imports nothing of loadgen).

Each is a `StrEnum`, so a member is its string wherever a string is expected (a JSON value, CSV, a format
string, a dict lookup, an older results file read back, which compares equal to the member), and a misspelt
name fails at import time instead of comparing False. Two places want the plain strings (`values`): argparse
`choices` and the keys of a dict that orjson writes.
"""

from __future__ import annotations

from enum import StrEnum


def values(names: type[StrEnum]) -> tuple[str, ...]:
    """The members' values as plain strings, where a member will not do: argparse `choices` (an invalid
    choice's message shows each choice's repr) and the keys of a dict that orjson writes (it takes members
    as values only)."""
    return tuple(m.value for m in names)


class Outcome(StrEnum):
    """What happened to one scheduled request (`Record.outcome`)."""

    OK = "ok"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    PROTOCOL_ERROR = "protocol_error"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"  # closed by the client on purpose (--cancel-fraction): counted apart, never a failure


class Phase(StrEnum):
    """A request's part of its cell: warm-up requests are excluded from every figure."""

    WARMUP = "warmup"
    MEASURE = "measure"
    VERIFY = "verify"  # a verification request (--verify): shares the load, counted in no latency figure


class Api(StrEnum):
    """The request format (`--api`)."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    SGLANG_GENERATE = "sglang-generate"


class DatasetFormat(StrEnum):
    """The format of a `--dataset` file, detected from its rows (docs/workloads.md)."""

    OPENAI_CHAT = "openai-chat"
    SHAREGPT = "sharegpt"
    PROMPT = "prompt"


class HttpClient(StrEnum):
    """The transport of the measured requests (`--http-client`)."""

    H1 = "h1"
    AIOHTTP = "aiohttp"


class ArrivalLaw(StrEnum):
    """The gaps between an open loop's sends (`--arrival`)."""

    CONSTANT = "constant"
    POISSON = "poisson"
    GAMMA = "gamma"


class ServerDownPolicy(StrEnum):
    """What a run does when the server goes away mid-cell (`--on-server-down`)."""

    STOP = "stop"
    WAIT = "wait"
    SKIP = "skip"


class PrefixCache(StrEnum):
    """Whether a dataset's prompts get a unique tag that keeps a prefix cache from serving them (`--prefix-cache`)."""

    UNIQUE = "unique"
    ALLOW = "allow"


class SpreadLaw(StrEnum):
    """How a spread length is drawn around its centre (`--contexts 1024±25%`, `--context-dist normal:…`)."""

    UNIFORM = "uniform"
    NORMAL = "normal"


class CellStatus(StrEnum):
    """A cell's status in the results: measured and usable, failed (with its reason), or never measured."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class MeasureFailure(StrEnum):
    """Why a sweep configuration's measurement ended without its cells (`sweep.attempts[].failure`)."""

    COULD_NOT_START = "could_not_start"  # the run refused its arguments against this server
    CRASHED = "crashed"  # the run raised
    NOT_AS_EXPECTED = "not_as_expected"  # the server measured is not the configuration's `expect`


class ConfigStatus(StrEnum):
    """A sweep configuration's status: every cell measured, some, none although tried, not tried yet."""

    OK = "ok"
    PARTIAL = "partial"
    FAILED = "failed"
    PENDING = "pending"


class Engine(StrEnum):
    """The inference engines loadgen recognises (and the simulator imitates)."""

    SGLANG = "sglang"
    VLLM = "vllm"
    LLAMACPP = "llamacpp"


class EnergyMethod(StrEnum):
    """How a GPU's energy was found: its energy counter's delta, or the integral of its power readings."""

    COUNTER = "counter"
    INTEGRATED = "integrated"
    MIXED = "mixed"


class AcceptSource(StrEnum):
    """Where a cell's accept length came from, best first (docs/accept_length.md)."""

    PER_REQUEST = "per_request"
    COUNTERS = "counters"
    GAUGE = "gauge"
    LOG = "log"
    CHUNKS = "chunks"


class Bottleneck(StrEnum):
    """What limited a cell's throughput (docs/bottleneck.md)."""

    CLIENT = "client"
    SERVER_HOST = "server_host"
    GPU_POWER_CAP = "gpu_power_cap"
    GPU_THERMAL = "gpu_thermal"
    GPU_MEMORY_BANDWIDTH = "gpu_memory_bandwidth"
    GPU_COMPUTE = "gpu_compute"
    UNKNOWN = "unknown"


class VerifyMode(StrEnum):
    """What fails a verified cell (`--verify`): garbage output only, or any output that differs from the reference."""

    GARBAGE = "garbage"
    EXACT = "exact"


class GarbageReason(StrEnum):
    """Why an output is garbage, judged on the output alone (docs/definitions.md#correctness)."""

    REPETITION_LOOP = "repetition_loop"
    EMPTY = "empty"
    REPLACEMENT_CHARACTERS = "replacement_characters"
    CUT_SHORT = "cut_short"


class TokenUnit(StrEnum):
    """What a verification output's positions count: the server's token ids, its logprob tokens, or pieces of
    the text (where the server returns neither; positions then estimated in tokens)."""

    IDS = "ids"
    LOGPROBS = "logprobs"
    TEXT = "text"
class SloMetric(StrEnum):
    """A per-request latency a target of `--slo` is set on (docs/definitions.md#slo)."""

    TTFT = "ttft"
    TPOT = "tpot"
    ITL = "itl"  # the request's own p99 per-token inter-token latency
    E2E = "e2e"
    TTFT_FROM_INTENDED = "ttft_from_intended"


class DriftCheck(StrEnum):
    """Whether a run measures its first cell again at the end, to see whether the server drifted
    (`--drift-check`; docs/drift.md): auto = when that costs one short cell."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class ServerMetrics(StrEnum):
    """Where the server's /metrics are scraped from (`--server-metrics`): auto = the target's own /metrics,
    off = nowhere; any other setting is the URL itself."""

    AUTO = "auto"
    OFF = "off"


class SearchOver(StrEnum):
    """What `loadgen search` raises until the SLO is missed."""

    CONCURRENCY = "concurrency"
    RATE = "rate"


class Better(StrEnum):
    """Which way a figure is better (`metrics/catalog.py`): a rise of a HIGH figure is an improvement, of a LOW
    one a regression; NEITHER is a state, not a goal (GPU utilization, a request count): shown, never ranked or
    gated."""

    HIGH = "high"
    LOW = "low"
    NEITHER = "neither"
