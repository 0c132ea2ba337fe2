"""A cell's result: a tree of dataclasses, one part per concern, written to JSON and read back into the same types.

The JSON of a cell is flat (every part's fields are keys of the cell's object, as loadgen has always written
them), so files written by earlier versions load unchanged: a key of no part is kept in `extra` and written
back as it was. `status` and `error` are never stored in the tree: they are judged from the incidents
(`incidents.judge`) whenever they are read or written. Every field's meaning, unit and formula is in its
`doc` metadata, from which docs/results.md is generated (`loadgen.results.schema_doc`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from loadgen.names import CellStatus
from loadgen.record import CellKey, cell_key
from loadgen.results import figures as fig
from loadgen.results.correctness_part import Correctness
from loadgen.results.fields_doc import doc
from loadgen.results.figures import Figures
from loadgen.results.gpu_part import Gpu
from loadgen.results.incidents import Incident, IncidentKind, Verdict, finished, judge
from loadgen.results.legacy_incidents import legacy_incidents, stored_verdict
from loadgen.results.slo_part import Slo
from loadgen.results.workload_part import Workload


@dataclass
class Requests:
    """How many requests the cell measured and how they ended."""

    requests: fig.RequestCounts = doc("{ok, failed, cancelled, abandoned, by_outcome}: every measured request counts "
                                      "once, under its outcome; cancelled = cut short by the client (an interrupt, a "
                                      "worker that died), abandoned = closed on purpose (--cancel-fraction; only when "
                                      "some were, never a failure), failed = every other outcome but ok (older files "
                                      "have no cancelled: failed counts them there)", "requests", {})
    requests_not_sent: int | None = doc("measured requests never sent (an interrupt or a server that went away "
                                        "stopped the cell early); null for duration-bound cells", "requests")
    max_failed_fraction: float | None = doc("the --max-failed-fraction the cell was judged by", "fraction")
    failed_fraction: float | None = doc("(failed + cancelled) / scheduled", "fraction")
    retried_on_new_connection: int | None = doc("requests sent once more on a new connection after the server "
                                                "closed a reused one before answering (not failures)", "requests")


@dataclass
class Load:
    """The load the cell carried and the window it is measured over."""

    duration_s: float | None = doc("measured window = max(t_end) − min(t_sent) over measured requests", "s")
    window_ns: fig.WindowNs | None = doc("{start_ns, end_ns}: the window's edges on the run's monotonic clock", "ns")
    wall_clock: fig.WallClock | None = doc("the window's edges in calendar time (ISO 8601 UTC and unix s)")
    achieved_concurrency: float | None = doc("Little's law: Σ e2e / window", "requests")
    steady: fig.Steady | None = doc("the steady window: from the first moment C requests are in flight to the "
                                 "first end after the last such moment (definitions.md#steady)")
    send_lateness_s: fig.Lateness | None = doc("t_sent − t_intended over sent requests: p50, p99, max", "s")
    schedule_request_rate: float | None = doc("open loop: the realised schedule's rate", "requests/s", optional=True)
    achieved_request_rate: float | None = doc("open loop: the rate requests were actually sent at", "requests/s", optional=True)
    target_request_rate: float | None = doc("open loop: the rate asked for (a ramp's mean)", "requests/s", optional=True)
    arrival: fig.Arrival | None = doc("open loop: {law, burstiness, max_concurrency}", optional=True)
    ramp: fig.Ramp | None = doc("--ramp: the ramp, its windows and the sustainable-rate verdict", optional=True)
    sustainable_request_rate: float | None = doc("--ramp: the highest rate whose TTFT met --slo-ttft", "requests/s", optional=True)
    throttle: fig.Throttle | None = doc("--max-request-rate: the closed loop's ceiling and how often it held", optional=True)
    attempt: int | None = doc("0, or n when the cell was measured again after the server came back")
    attempts: list | None = doc("earlier attempts of the cell (--on-server-down wait): status, error, requests", optional=True)
    recovery: fig.Recovery | None = doc("--on-server-down wait: {ready, elapsed_s, reason} of the last wait", optional=True)
    shards: fig.Shards | None = doc("merged cells: {count, ran, requests, window_overlap}", optional=True)
    shard_has_no_slot: bool | None = doc("a shard whose part of this cell's concurrency is empty", optional=True)


@dataclass
class Prompts:
    """What the prompts were and what the server's prefix cache served."""

    prompt_tokens_mean: float | None = doc("mean prompt_tokens (server's count) over ok requests", "tokens")
    prompt_tokens_min: int | None = doc("smallest prompt over ok requests", "tokens")
    prompt_tokens_max: int | None = doc("largest prompt over ok requests", "tokens")
    cached_tokens: int | None = doc("Σ prompt tokens served by the prefix cache (null: not reported)", "tokens")
    cached_fraction: float | None = doc("cached_tokens / Σ prompt_tokens", "fraction")
    lengths: Figures | None = doc("distributions of prompt and output lengths over ok requests", "tokens")
    by_category: dict[str, Figures] | None = doc("--dataset: the cell's figures per row category")


@dataclass
class Latency:
    """Latency distributions over ok requests (definitions.md gives each formula)."""

    ttft_s: fig.Distribution | None = doc("time to first token = t_first_token − t_sent", "s")
    ttft_from_intended_s: fig.Distribution | None = doc("t_first_token − t_intended (coordinated omission)", "s")
    tpot_s: fig.Distribution | None = doc("(t_last_token − t_first_token) / (completion_tokens − 1)", "s")
    itl_s: fig.Distribution | None = doc("per-token inter-token latency: each chunk gap spread over its tokens", "s")
    e2e_s: fig.Distribution | None = doc("t_end − t_sent", "s")
    e2e_from_intended_s: fig.Distribution | None = doc("t_end − t_intended", "s")
    prefill_s: float | None = doc("prompt processing as the client sees it = mean TTFT", "s")
    steps: fig.Steps | None = doc("decode steps: events < 1 ms apart are one step; step ITL and tokens per step")


@dataclass
class Throughput:
    """Tokens the server produced and how fast."""

    output_tokens: int | None = doc("Σ completion_tokens of ok requests (the server's usage counts)", "tokens")
    output_tok_s: float | None = doc("aggregate: output_tokens / duration_s", "tokens/s")
    request_tok_s: fig.Distribution | None = doc("per request: (completion_tokens − 1) / (t_end − t_first_token); "
                                                 "mean, p10, p50, p90", "tokens/s")
    prefill_tok_s: float | None = doc("mean over ok requests of (prompt − cached tokens) / TTFT", "tokens/s")
    tokens_per_chunk_mean: float | None = doc("Σ completion_tokens / Σ content chunks", "tokens")


@dataclass
class AcceptLength:
    """Speculative decoding's accept length, from the best source the cell had."""

    accept_length: fig.AcceptFigures | None = doc("{value, source, per_source, unavailable}: best source first "
                                        "(per_request, counters, gauge, log, chunks; accept_length.md)", "tokens")
    accept_length_per_request: float | None = doc("from per-request server data, weighted by verify steps",
                                                  "tokens")
    accept_length_chunks: float | None = doc("the client's estimate: tokens per content chunk", "tokens")
    one_event_per_token: bool | None = doc("the server streams one event per token (chunks say nothing)")
    draft_tokens: Figures | None = doc("llama.cpp's per-request draft counts (a cross-check)", "tokens")


@dataclass
class Telemetry:
    """What the telemetry sources and the client's self-monitoring saw during the cell."""

    power: fig.Power | None = doc("GPU power and energy over the window: per GPU, total, J per output token "
                                "(power.md)", "W, J")
    client: fig.ClientHealth | None = doc("the client's own health: event-loop lag, CPU, saturated and why")
    telemetry: Figures = doc("each source's own values: {available, reason, …}", "", {})


@dataclass
class Noise:
    """How far the key figures can be trusted: their confidence intervals, and the repeats (--repeat)."""

    intervals: fig.Intervals | None = doc("{figure: [low, high]}: the 95 % confidence interval of each key figure, "
                                    "named by its path (output_tok_s, request_tok_s.mean, ttft_s.p50, "
                                    "e2e_s.mean, accept_length.value); a percentile bootstrap over the ok "
                                    "requests, or Student's t over the repeats (definitions.md#noise)",
                                    "the figure's", optional=True)
    interval_method: fig.IntervalMethod | None = doc("{method: bootstrap | t over repeats, level, resamples, seed, "
                                          "samples}: how `intervals` were made", optional=True)
    repeats: fig.Repeats | None = doc("--repeat N: {n, values and samples: {figure: [each repeat's]}, windows: "
                                  "[each repeat's]}; the key figures are then the mean over the repeats, the "
                                  "other figures the last repeat's", optional=True)


@dataclass
class CellResult:
    """One cell of the matrix, every figure in its part; status and error judged from `incidents`."""

    key: CellKey
    run_id: str | None = None
    requests: Requests = field(default_factory=Requests)
    load: Load = field(default_factory=Load)
    prompts: Prompts = field(default_factory=Prompts)
    latency: Latency = field(default_factory=Latency)
    throughput: Throughput = field(default_factory=Throughput)
    accept: AcceptLength = field(default_factory=AcceptLength)
    telemetry: Telemetry = field(default_factory=Telemetry)
    workload: Workload = field(default_factory=Workload)
    noise: Noise = field(default_factory=Noise)
    gpu: Gpu = field(default_factory=Gpu)
    slo: Slo | None = None  # latency targets and goodput (--slo)
    correctness: Correctness | None = None  # output verification (--verify)
    incidents: list[Incident] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # notes that are not incidents (telemetry sources)
    extra: dict[str, Any] = field(default_factory=dict)  # keys of no part (newer or unknown), kept as they were

    @property
    def verdict(self) -> Verdict:
        return judge(self.incidents)

    @property
    def status(self) -> CellStatus:
        return self.verdict.status

    @property
    def error(self) -> str | None:
        return self.verdict.error

    def add(self, kind: IncidentKind, reason: str) -> None:
        """Record an incident once, while the result is built (a built one changes only through `amended`)."""
        if (incident := Incident(kind, reason)) not in self.incidents:
            self.incidents.append(incident)

    def has(self, kind: IncidentKind) -> bool:
        return any(i.kind is kind for i in self.incidents)

    @property
    def finished(self) -> bool:
        """Kept on resume (`incidents.finished`, the one rule for runs and sweeps)."""
        return finished(self.incidents)

    @property
    def notes(self) -> list[str]:
        """The cell's note, in order: the incidents' notes, then the other warnings."""
        return [*self.verdict.notes, *self.warnings]

    def to_json(self) -> dict:
        return to_json(self)


PARTS = {"requests": Requests, "load": Load, "prompts": Prompts, "latency": Latency, "throughput": Throughput,
         "accept": AcceptLength, "telemetry": Telemetry, "noise": Noise, "workload": Workload,
         "gpu": Gpu}
RESERVED = ("slo", "correctness")
TYPED_RESERVED: dict[str, Any] = {"slo": Slo, "correctness": Correctness}  # reserved parts filled with a typed part: written by its to_json, read by from_json
KEY_FIELDS = ("context_tokens", "concurrency", "request_rate", "again")
JUDGED = ("status", "error", "warnings", "incidents")


def part_keys() -> dict[str, str]:
    """Every flat JSON key of a part's field → the part's name."""
    return {f.name: part for part, cls in PARTS.items() for f in fields(cls)}


def to_json(result: CellResult) -> dict:
    """The cell's flat JSON object: key, run id, every part's fields, status and error as judged, the notes."""
    out: dict[str, Any] = result.key.as_dict()
    if result.run_id is not None:
        out["run_id"] = result.run_id
    measured = bool(result.requests.requests)  # a cell never measured is written as its key and verdict
    for part in PARTS:
        values = getattr(result, part)
        out.update({f.name: getattr(values, f.name) for f in fields(values)
                    if _written(getattr(values, f.name), f.metadata["optional"] or not measured)})
    out.update({name: _reserved_json(getattr(result, name)) for name in RESERVED if getattr(result, name) is not None})
    verdict = result.verdict
    out |= {"status": verdict.status, "error": verdict.error, "warnings": [*verdict.notes, *result.warnings],
            "incidents": [i.to_json() for i in result.incidents]}
    return out | result.extra


def _reserved_json(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


def _reserved(name: str, value: Any) -> Any:
    typed = TYPED_RESERVED.get(name)
    return typed.from_json(value) if typed is not None and isinstance(value, dict) else value


def _written(value: Any, optional: bool) -> bool:
    return not optional or value not in (None, {}, [])


def typed_parts(figures: dict) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each part made from the flat figures that are its fields, and the figures of no part (`extra`)."""
    owner = part_keys()
    values: dict[str, dict[str, Any]] = {part: {} for part in PARTS}
    extra = {}
    for name, value in figures.items():
        if name in owner:
            values[owner[name]][name] = value
        elif name not in (*KEY_FIELDS, *JUDGED, *RESERVED, "run_id"):
            extra[name] = value
    return {part: PARTS[part](**v) for part, v in values.items()}, extra


def from_json(data: dict) -> CellResult:
    """A cell read back from its JSON; a file of an earlier loadgen (no `incidents`) gets the incidents its
    status, error and figures imply (`legacy_incidents`), so it is judged as it was."""
    key = cell_key(data)
    parts, extra = typed_parts(data)
    result = CellResult(key, data.get("run_id"), **parts,
                        **{name: _reserved(name, data.get(name)) for name in RESERVED}, extra=extra)
    if "incidents" in data:
        result.incidents = [Incident.from_json(i) for i in data["incidents"]]
        if data.get("status", result.status) != result.status:  # a status set by hand (or by another tool)
            result.incidents += stored_verdict(data)
    else:
        result.incidents = legacy_incidents(data)
    notes = set(result.verdict.notes)
    result.warnings = [w for w in data.get("warnings") or [] if w not in notes]
    return result
