"""Run configuration: typed settings, each default written once.

`RunConfig` holds the matrix and the request options, and one sub-config per feature (open loop, telemetry,
faults, parallelism, live exporter, trace replay, cancellation, verification). The CLI (`loadgen.cli`) fills
them from the command line after checking every value; everything else only reads them.

Size exception: the module holds every sub-config, next to `RunConfig`, so that each default is written once and
`public_args` sees them all; each is a few plain fields.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import dataclass, field

from loadgen.errors import UsageError
from loadgen.names import (
    Api,
    ArrivalLaw,
    DatasetFormat,
    DriftCheck,
    HttpClient,
    PrefixCache,
    ServerDownPolicy,
    ServerMetrics,
    SpreadLaw,
    VerifyMode,
)
from loadgen.record import CellKey

DEFAULT_SPAN_S = 10.0  # default measured requests of a rate cell: max(16, ⌈10 s × rate⌉)
SLOT_RAMP_AUTO_S = 1.0  # --slot-ramp auto with --slo: C prefills spread over 1 s, not queued at one instant
KEY_HINT = "give a file that holds the key"
AUTO_STREAMS_PER_WORKER = 256  # --workers auto: one process per this many streams of the largest concurrency


def default_requests_per_cell(concurrency: int) -> int:
    """Three waves of the concurrency, at least 16. The ramp-down after the last job is taken lasts up to one
    request, and the steady window (all C slots busy, `metrics.steady`) about the waves before it: three
    waves keep the steady window at least twice the ramps, even when request lengths vary."""
    return max(16, 3 * concurrency)


def default_requests_per_rate(rate: float) -> int:
    """Measured requests of a rate cell without --requests-per-cell: max(16, ⌈10 s × rate⌉)."""
    return max(16, math.ceil(DEFAULT_SPAN_S * rate))


@dataclass(frozen=True)
class LengthSpread:
    """uniform: centre ± half_width (a fraction of the centre when `relative`); normal: sd = half_width."""

    law: SpreadLaw
    half_width: float
    relative: bool = False

    def draw(self, rng: random.Random, centre: int, n: int) -> list[int]:
        """`n` lengths around `centre`, each ≥ 1."""
        if self.law == SpreadLaw.NORMAL:
            return [max(1, round(rng.gauss(centre, self.half_width))) for _ in range(n)]
        w = self.half_width * centre if self.relative else self.half_width
        lo, hi = max(1, round(centre - w)), max(1, round(centre + w))
        return [rng.randint(lo, hi) for _ in range(n)]

    def describe(self) -> str:
        if self.law == SpreadLaw.NORMAL:
            return f"normal (sd {self.half_width:g})"
        return f"uniform ±{self.half_width * 100:g}%" if self.relative else f"uniform ±{self.half_width:g}"



@dataclass(frozen=True)
class RampSpec:
    """`--ramp R0:R1:S`: the target rate rises linearly from r0 to r1 req/s over duration_s seconds."""

    r0: float
    r1: float
    duration_s: float


@dataclass
class OpenLoopConfig:
    """Open-loop load (`--request-rate`, `--ramp`); off when neither is given."""

    request_rate: list[float] | None = None
    arrival: ArrivalLaw | None = None  # None when open loop is off
    burstiness: float | None = None
    max_concurrency: int | None = None
    ramp: RampSpec | None = None
    slo_ttft_ms: float | None = None
    ramp_window_s: float | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.request_rate or self.ramp)

    @property
    def slo_ttft_s(self) -> float | None:
        return self.slo_ttft_ms / 1e3 if self.slo_ttft_ms else None


@dataclass
class TelemetryConfig:
    """Where each cell's accept length and power come from (`--server-metrics`, `--accept-log-cmd`, …)."""

    server_metrics: str = ServerMetrics.AUTO  # auto | off | a /metrics URL
    accept_log_cmd: str | None = None  # as given; run as accept_log_argv, without a shell
    accept_log_argv: list[str] | None = None
    dcgm: list[str] = field(default_factory=list)
    nvml: bool = False
    telemetry_interval_s: float = 1.0


@dataclass
class FaultsConfig:
    """What to do when the server goes away (`--on-server-down`) or the user interrupts (`--drain-timeout`)."""

    on_server_down: ServerDownPolicy = ServerDownPolicy.STOP
    server_down_after: int = 3
    server_wait_timeout_s: float = 600.0
    cell_attempts: int = 3
    drain_timeout_s: float = 30.0


@dataclass
class ParallelConfig:
    """Client processes and shards (`--workers`, `--shard`, `--start-at`, `--cell-period`, `--run-id`, `--ray`,
    `--workers-per-node`)."""

    http_client: HttpClient = HttpClient.H1
    workers: int = 1
    shard: tuple[int, int] | None = None  # (index, count)
    run_id: str | None = None
    start_at: float | None = None
    cell_period_s: float | None = None
    ray_address: str | None = None  # --ray: the parts run as Ray actors (loadgen.parallel.ray_pool)
    workers_per_node: int | None = None  # --ray: K parts on every node (else `workers` parts on as many nodes)


@dataclass(frozen=True)
class TlsConfig:
    """How an https:// server's certificate is checked (`--ca-cert`, `--insecure`; docs/wire.md): against the
    system's CAs, plus `ca_cert` (a PEM file) when given; `insecure` skips the check."""

    ca_cert: str | None = None
    insecure: bool = False


@dataclass
class ExporterConfig:
    """The live Prometheus exporter (`--metrics-port`); off when port is None."""

    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_linger_s: float = 10.0
    gpu_power_limit_w: float | None = None  # --gpu-power-limit: W per GPU for the live metrics


@dataclass
class WorkloadConfig:
    """Where requests come from beyond the synthetic matrix (`--dataset`, `--prefix-cache`,
    `--max-request-rate`; see docs/workloads.md)."""

    dataset: str | None = None  # a file replayed row by row; None = the synthetic matrix
    dataset_format: DatasetFormat | None = None  # detected from the rows
    category_field: str = "category"
    max_bad_rows: int = 0
    prefix_cache: PrefixCache = PrefixCache.UNIQUE  # unique: a unique first line per request | allow: rows sent unchanged
    ignore_eos_source: str = "default"  # flag | default (on for the synthetic matrix) | rows (a dataset)
    max_request_rate: float | None = None  # closed loop: at most R request starts per second
    slot_ramp_s: float = 0.0  # closed loop: slots start spread over this (--slot-ramp; SLOT_RAMP_AUTO_S with --slo)
    context_spreads: tuple[tuple[int, LengthSpread], ...] = ()  # lengths drawn per request, per prompt length
    output_spread: LengthSpread | None = None  # of --max-tokens; None: every request gets --max-tokens
    shared_prefix: tuple[int, int] | None = None  # --shared-prefix GROUPS:TOKENS: each group's shared opening
    sessions: bool = False  # --sessions: a dataset's rows replayed as multi-turn conversations
    think_time_s: float = 0.0  # --think-time: the wait before a session's next turn (a row's think_time wins)


@dataclass
class TraceConfig:
    """Timestamped trace replay (`--trace`, `--trace-speed`; docs/workloads.md): one open-loop cell per speed.
    Field names are unique across sub-configs: the results' `args` is one flat mapping."""

    trace: str | None = None
    trace_speeds: list[float] = field(default_factory=lambda: [1.0])
    trace_rates: list[float] = field(default_factory=list)  # the trace's mean request rate per speed (the cells' keys)
    trace_max_concurrency: int | None = None  # --max-concurrency: a cap on requests in flight

    @property
    def enabled(self) -> bool:
        return self.trace is not None

    def speed_of(self, rate: float | None) -> float:
        """The speed whose cell has the key rate `rate`."""
        return self.trace_speeds[self.trace_rates.index(rate)] if rate in self.trace_rates else 1.0


@dataclass
class CancelConfig:
    """Requests the client closes on purpose (`--cancel-fraction`, `--cancel-after`, `--cancel-after-tokens`)."""

    cancel_fraction: float = 0.0
    cancel_after_s: float | None = None
    cancel_after_tokens: int | None = None

    @property
    def enabled(self) -> bool:
        return self.cancel_fraction > 0


DEFAULT_SLO_ATTAINMENT = 0.9  # DistServe's goodput definition; why 0.9: docs/definitions.md#slo


@dataclass
class SloConfig:
    """Latency targets (`--slo`, `--slo-attainment`): off when `targets` is empty."""

    slo_targets: dict[str, float] = field(default_factory=dict)  # SloMetric → the most it may be, in seconds
    slo_attainment: float = DEFAULT_SLO_ATTAINMENT  # the share of requests that must be good to meet it

    @property
    def enabled(self) -> bool:
        return bool(self.slo_targets)


@dataclass
class VerifyConfig:
    """Verification requests in every cell (`--verify`; docs/verify.md); off when `mode` is None."""

    mode: VerifyMode | None = None
    prompts_file: str | None = None  # None: the built-in prompts
    max_tokens: int = 64
    reference_file: str | None = None  # a reference saved by another run; None: answered at the run's start
    save_reference: str | None = None  # where to write the reference this run used
    max_garbage_fraction: float = 0.0  # a cell with a larger share of garbage outputs is failed

    @property
    def enabled(self) -> bool:
        return self.mode is not None


@dataclass(frozen=True)
class CellSize:
    """How much load each cell carries (the part of `RunConfig` the drivers and the drift check read)."""

    requests_per_cell: int | None = None  # None: by concurrency (closed loop) or rate (open loop)
    duration_per_cell_s: float | None = None  # a cell bound by time, not by a number of requests
    warmup: int = 0
    repeat: int = 1

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_cell or default_requests_per_cell(concurrency)


@dataclass
class RunConfig:
    url: str | None
    api: Api = Api.OPENAI_CHAT
    model: str | None = None
    concurrency: list[int] = field(default_factory=lambda: [1, 32, 64, 128])
    contexts: list[int] = field(default_factory=lambda: [60, 1024])
    max_tokens: int = 512
    requests_per_cell: int | None = None
    duration_per_cell_s: float | None = None
    warmup: int = 0
    label: str | None = None
    out: str | None = None
    out_auto: bool = False  # --out (and --label) not given: out named by the time, an interrupted one resumed
    seed: int = 0
    timeout_s: float = 600.0
    idle_timeout_s: float = 120.0
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = None
    prompts_file: str | None = None
    temperature: float = 0.0
    ignore_eos: bool = True
    sim_args: list[str] = field(default_factory=list)
    max_failed_fraction: float = 0.01  # a cell with more failed + cancelled requests than this share is failed
    wait_ready_s: float = 600.0  # how long to wait for a starting server before the first cell (0: not at all)
    # the default --wait-ready gives up this soon on a port that refused every connection (None: it was given)
    wait_refused_s: float | None = 30.0
    force: bool = False  # replace an existing --out instead of resuming it
    repeat: int = 1  # each cell measured this many times (--repeat): mean and interval across the repeats
    drift_check: DriftCheck = DriftCheck.AUTO  # --drift-check: the first cell measured again at the end
    wide: bool = False  # print every column of the matrix (--wide), not the default table of WIDTH characters
    open_loop: OpenLoopConfig = field(default_factory=OpenLoopConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    exporter: ExporterConfig = field(default_factory=ExporterConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)
    cancel: CancelConfig = field(default_factory=CancelConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    slo: SloConfig = field(default_factory=SloConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)

    def requests_for(self, concurrency: int) -> int:
        return self.size.requests_for(concurrency)

    @property
    def size(self) -> CellSize:
        return CellSize(self.requests_per_cell, self.duration_per_cell_s, self.warmup, self.repeat)

    def cells(self) -> list[CellKey]:
        """The matrix, in order: for each prompt length, each concurrency (closed loop) or each rate (open
        loop, concurrency = the cap or 0; a ramp is one cell at its top rate; a trace, one cell per speed at the
        trace's mean rate)."""
        o = self.open_loop
        if self.trace.enabled:
            t = self.trace
            return [CellKey(0, t.trace_max_concurrency or 0, request_rate=r) for r in t.trace_rates]
        if not o.enabled:
            return [CellKey(ctx, c) for ctx in self.contexts for c in self.concurrency]
        rates = [o.ramp.r1] if o.ramp else (o.request_rate or [])
        return [CellKey(ctx, o.max_concurrency or 0, request_rate=r) for ctx in self.contexts for r in rates]

    def api_key(self) -> str | None:
        """The key from --api-key-file, else from the environment variable; never from the command line."""
        if self.api_key_file:
            from loadgen.files import read_input  # not at import: --help reaches this module, and files needs orjson

            raw = read_input(self.api_key_file, KEY_HINT, "--api-key-file")
            try:
                key = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise UsageError(f"--api-key-file {self.api_key_file}: not UTF-8 text; {KEY_HINT}") from None
            if not key or "\n" in key:
                raise UsageError(f"--api-key-file {self.api_key_file} must hold the key on one line (it holds "
                                 f"{'nothing' if not key else 'several lines'})")
            return key
        return os.environ.get(self.api_key_env) or None

    def auth_headers(self) -> dict:
        key = self.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def public_args(self) -> dict:
        """The arguments as stored in results, one flat mapping (the key itself is never part of them)."""
        subs = ("open_loop", "telemetry", "faults", "parallel", "exporter", "workload", "slo", "trace", "cancel", "tls")
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in (*subs, "verify")}
        if self.verify.enabled:  # nested: its names (max_tokens) are the run's too
            d["verify"] = _public(self.verify)
        for name in subs:
            d.update(_public(getattr(self, name)))
        if self.exporter.metrics_port is None:
            for k in dataclasses.asdict(self.exporter):
                d.pop(k)
        if self.telemetry.accept_log_argv is None:
            d.pop("accept_log_argv")
        return d


def _public(sub) -> dict:
    out = {}
    for f in dataclasses.fields(sub):
        value = getattr(sub, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


DRIFT_CHECK_ENV = "LOADGEN_DRIFT_CHECK"  # the default of --drift-check where a whole environment sets it (a CI job)


def default_drift_check() -> str:
    """--drift-check's default: $LOADGEN_DRIFT_CHECK when set (auto, on or off), else auto."""
    text = os.environ.get(DRIFT_CHECK_ENV, "").strip().lower() or DriftCheck.AUTO.value
    if text not in {c.value for c in DriftCheck}:
        raise UsageError(f"${DRIFT_CHECK_ENV}={text!r}: give auto, on or off (the default of --drift-check)")
    return text
