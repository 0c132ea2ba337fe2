"""The shapes of a cell's blocks of figures: `TypedDict`s, so the JSON stays the plain objects loadgen has always
written (byte for byte) while a reader and a type checker know each block's keys.

Every key is optional (`total=False`): a block of an earlier loadgen, or of a source that served less, lacks
some. Readers use `block.get(...)` on these typed blocks; the cell itself is read through `CellResult`'s parts.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Distribution(TypedDict, total=False):
    """{mean, p10, p50, p90, p99, samples} of raw values (`metrics.stats.distribution`): samples = how many;
    every figure None when there are none (p10 only where a low tail matters: per-request tok/s)."""

    mean: float | None
    p10: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    samples: int


class Lateness(TypedDict, total=False):
    """t_sent − t_intended over sent requests (s)."""

    p50: float | None
    p99: float | None
    max: float | None


class RequestCounts(TypedDict, total=False):
    """{ok, failed, cancelled, abandoned, by_outcome}: every measured request once, under its outcome."""

    ok: int
    failed: int
    cancelled: int
    abandoned: int
    by_outcome: dict[str, int]


class WindowNs(TypedDict, total=False):
    """The measured window's edges on the run's monotonic clock (ns)."""

    start_ns: int | None
    end_ns: int | None


class WallClock(TypedDict, total=False):
    """The window's edges in calendar time: ISO 8601 UTC and unix s (`provenance.wall_clock`: all four, or no
    block)."""

    start: str
    end: str
    start_unix_s: float
    end_unix_s: float


class Steady(TypedDict, total=False):
    """The steady window (definitions.md#steady)."""

    start_ns: int | None
    end_ns: int | None
    duration_s: float | None
    ramp_s: float | None
    requests: int
    ok: int
    output_tok_s: float | None
    achieved_concurrency: float | None


class Power(TypedDict, total=False):
    """GPU power and energy over the cell's window (`metrics.power.summarize_power`, power.md)."""

    source: str
    gpus: int
    mean_w_total: float | None
    max_w_total: float | None
    limit_w_total: float | None
    power_fraction_of_limit: float | None
    per_gpu: list[dict[str, Any]]
    window_s: float | None
    energy_j: float | None
    energy_method: str | None
    energy_coverage: float | None
    j_per_output_token: float | None
    output_tokens_per_j: float | None


class ClientHealth(TypedDict, total=False):
    """The client's own health (`metrics.client_health`): event-loop lag, CPU, saturated and why."""

    loop_lag_p99_s: float | None
    cpu_percent: float | None
    cpu_percent_total: float | None
    saturated: bool
    reasons: list[str]
    late_lags: int
    workers: int
    per_worker: list[dict[str, Any]]


class AcceptFigures(TypedDict, total=False):
    """Accept length from the best source (accept_length.md): the value, its source, every source's value, the
    sources that had none and why, and where sources disagree."""

    value: float | None
    source: str | None
    per_source: dict[str, float]
    unavailable: dict[str, str]
    disagreement: str


class GpuTotal(TypedDict, total=False):
    """The GPUs' activity over the window in total (`metrics.gpu_window.total_figures`): the sum of the memory used
    and the time throttled, the mean of the others, each over the GPUs that served it."""

    utilization_percent: float
    sm_clock_mhz: float
    sm_clock_max_mhz: float
    sm_clock_fraction: float
    gr_engine_active: float
    sm_active: float
    sm_occupancy: float
    tensor_active: float
    dram_active: float
    memory_used_mib: float
    power_cap_fraction: float
    thermal_fraction: float
    hw_slowdown_fraction: float
    power_violation_s: float
    power_violation_fraction: float
    thermal_violation_s: float


class GpuActivity(TypedDict, total=False):
    """GPU activity over the window (`metrics.gpu_window.cell_activity`): the figures per GPU and in total
    (utilization_percent, sm_clock_fraction, dram_active, tensor_active, power_cap_fraction, …)."""

    source: str
    gpus: int
    total: GpuTotal
    per_gpu: list[dict[str, Any]]
    unavailable: dict[str, str]


class Steps(TypedDict, total=False):
    """Decode steps (`metrics.steps.step_figures`): events < 1 ms apart are one step."""

    threshold_s: float
    step_itl_s: Distribution
    steps_per_request_mean: float | None
    events_per_step_mean: float | None
    tokens_per_step: float | None


class Ramp(TypedDict, total=False):
    """--ramp: the ramp's rates, its windows and the sustainable-rate verdict."""

    r0: float
    r1: float
    duration_s: float
    slo_ttft_s: float  # a ramp is judged against --slo-ttft, which --ramp requires
    window_s: float
    sustainable_request_rate: float | None
    held: bool
    crossed_at_s: float | None
    rate_at_cross: float | None
    ttft_p99_at_cross_s: float | None
    windows_judged: int
    series: list[Any]


class Repeats(TypedDict, total=False):
    """--repeat N: {n, values: {figure: [each repeat's value]}, windows: [each repeat's window]}."""

    n: int
    values: dict[str, list[float | None]]
    samples: dict[str, list[int]]
    windows: list[Any]


class IntervalMethod(TypedDict, total=False):
    """How a cell's intervals were made: a bootstrap over its requests, or Student's t over the repeats."""

    method: str
    level: float
    resamples: int
    seed: int
    samples: int


class Arrival(TypedDict, total=False):
    """Open loop: the arrival law (a trace: its file and speed) and the in-flight cap."""

    law: str
    burstiness: float | None
    max_concurrency: int | None
    trace: str
    speed: float


class Throttle(TypedDict, total=False):
    """--max-request-rate: the closed loop's ceiling and how often it held (`metrics.throttle`)."""

    max_request_rate: float
    achieved_request_rate: float | None
    peak_starts_per_s: int
    throttled_s: float
    throttled_fraction: float | None
    throttled_starts: int


class Recovery(TypedDict, total=False):
    """--on-server-down wait: the last wait for the server."""

    ready: bool
    elapsed_s: float
    reason: str | None


class Shards(TypedDict, total=False):
    """A merged cell's shards: how many, how many ran it, their measured requests, their windows' overlap."""

    count: int
    ran: int
    requests: list[int]
    window_overlap: float | None


class Sessions(TypedDict, total=False):
    """--sessions: the multi-turn sessions' figures (definitions.md#sessions)."""

    sessions: int
    turns_mean: float | None
    turns_max: int | None
    ok_fraction: float | None


class SharedPrefix(TypedDict, total=False):
    """--shared-prefix: what a prefix cache could serve and what it did (definitions.md#shared-prefix)."""

    groups: int
    tokens: int
    cacheable_tokens: int
    cacheable_fraction: float | None
    cached_tokens: int | None
    cached_of_cacheable: float | None


class Cancellation(TypedDict, total=False):
    """--cancel-fraction: the requests the client closed on purpose (definitions.md#cancellation)."""

    abandoned: int
    abandoned_fraction: float | None
    tokens_before_close: dict[str, float | None]
    close_after_s: dict[str, float | None]


Intervals = dict[str, list[float]]  # {figure path: [low, high]}, the 95 % interval of each key figure
Figures = dict[str, Any]  # a block whose keys vary with the load or the source, documented per field
