"""The catalog of reported figures: one entry per figure, read by every view (docs/definitions.md gives each
formula; the entry says how the figure is read, shown and judged).

An entry (`Figure`) names the figure (`key`: its name in compare's rows and columns, the HTML's `data-metric`, the
live exporter's gauge set), says where a cell's result holds it (`path`, the results file's JSON names, as
`cell_view.figure` reads them) or how it follows from other figures (`derive`), how it is shown (`title`, `unit`,
`scale` = shown unit per stored unit, `fmt`), which way is better (`better`), where its 95 % interval is
(`interval`, a key of the cell's `intervals`), whether `--repeat` averages it (`repeat`), its live gauge
(`live`) and what it means (`meaning`, one line). `compare` says whether compare and the regression gate know it
and when its column is shown (`Shown`); `term` is the name a `--fail-on` term gives it where that is not `key`.

Compare's figures (`compare.METRICS`), the gate's (`compare_terms.FIGURES`), the exporter's finished-cell gauges
(`exporters/cell_results.CELL_RESULTS`), the key figures of `--repeat` and the bootstrap (`cell_noise.KEY_FIGURES`)
and the verdict's objectives (`results/objectives.py`) are this catalog, filtered. A new figure is one entry here
(and its formula where the cell does not hold it yet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, overload

from loadgen.metrics import verify_steps as vs
from loadgen.names import Better

Reader = Callable[[str], Any]  # a path of the cell's JSON ("ttft_s.p50") → the cell's value there (None: none)


class Shown(StrEnum):
    """When compare's tables (text, Markdown, HTML) give a compared figure a column; its rows, CSV, JSON and the
    gate have every compared figure."""

    ALWAYS = "always"
    WITH_VALUES = "with values"  # only when some row has the figure (accept length, power: not every server has them)
    WITH_SLO = "with slo"  # only when some cell was measured with --slo
    ASKED = "asked"  # only when asked for by name (`compare.columns(rows, asked)`)


@dataclass(frozen=True, slots=True)
class Figure:
    """One reported figure (see the module docstring)."""

    key: str
    path: str | None
    title: str
    unit: str
    better: Better
    meaning: str
    scale: float = 1.0
    fmt: str = ".1f"
    interval: str | None = None
    repeat: bool = False
    live: str | None = None
    compare: Shown | None = None
    width: int = 0  # compare's text column: its width
    header: str | None = None  # compare's text column: its header, where it is not `title`
    speedup: bool = False  # compare shows its ratio to the baseline ("vs base")
    ranked: bool = True  # compare may mark a best of it (accept length: never, a larger draft lengthens it)
    term: str | None = None
    aliases: tuple[str, ...] = ()
    derive: Callable[[Reader], float | None] | None = None  # a figure the cell does not hold: from those it does
    inputs: tuple[str, ...] = ()  # the paths `derive` reads

    def read(self, at: Reader) -> float | None:
        """The figure from a reader of the cell's paths: the number at `path` (a bool as 0 or 1), or `derive`'s."""
        if self.derive is not None:
            return self.derive(at)
        value = at(self.path) if self.path else None
        if isinstance(value, bool):
            return float(value)
        return value if isinstance(value, (int, float)) else None

    @overload
    def shown(self, stored: float) -> float: ...
    @overload
    def shown(self, stored: None) -> None: ...
    @overload
    def shown(self, stored: float | None) -> float | None: ...

    def shown(self, stored: float | None) -> float | None:
        """The stored value in the figure's unit (TTFT: s stored, ms shown)."""
        return None if stored is None else stored * self.scale

    def text(self, stored: float | None) -> str | None:
        """The value as the tables show it (`fmt` in `unit`), or None."""
        shown = self.shown(stored)
        return None if shown is None else format(shown, self.fmt)

    @property
    def name(self) -> str:
        """The name a `--fail-on` term gives it."""
        return self.term or self.key

    @property
    def column(self) -> str:
        return self.header or self.title


def _verify_steps_per_s(at: Reader) -> float | None:
    return vs.verify_steps_per_s(at("output_tok_s"), at("accept_length.value"))


def _step_ms(at: Reader) -> float | None:
    return vs.step_ms(at("steps.step_itl_s.mean"))


def _full_draft_share(at: Reader) -> float | None:
    return vs.full_draft_share(at("accept_by_position"))


HIGH, LOW, NEITHER = Better.HIGH, Better.LOW, Better.NEITHER

# in the order of the terminal matrix (loadgen/report/table.py); compare, the exporter and --repeat keep it
CATALOG: tuple[Figure, ...] = (
    Figure("ok_requests", "requests.ok", "ok", "requests", NEITHER, "requests that ended ok.",
           live="loadgen_cell_ok_requests"),
    Figure("failed_requests", "requests.failed", "failed", "requests", LOW, "requests that ended in an error.",
           live="loadgen_cell_failed_requests"),
    Figure("out_tok_s", "output_tok_s", "out tok/s", "tok/s", HIGH,
           "aggregate output tokens/s (results JSON output_tok_s).", interval="output_tok_s", repeat=True,
           live="loadgen_cell_output_tokens_per_second", compare=Shown.ALWAYS, width=10, speedup=True),
    Figure("good_tok_s", "slo.good_output_tok_s", "good tok/s", "tok/s", HIGH,
           "output tokens of the requests that met every SLO target per second.", compare=Shown.WITH_SLO,
           width=10),
    Figure("req_tok_s", "request_tok_s.mean", "req tok/s", "tok/s", HIGH,
           "mean per-request decode rate (tokens/s).", interval="request_tok_s.mean", repeat=True,
           live="loadgen_cell_request_output_tokens_per_second_mean", compare=Shown.ALWAYS, width=14,
           header="req tok/s mean", speedup=True),
    Figure("req_tok_s_p10", "request_tok_s.p10", "req p10", "tok/s", HIGH,
           "10th percentile of the per-request decode rate (tokens/s).",
           live="loadgen_cell_request_output_tokens_per_second_p10"),
    Figure("ttft_mean_s", "ttft_s.mean", "TTFT mean ms", unit="ms", scale=1000.0, better=LOW, meaning="mean TTFT.",
           live="loadgen_cell_ttft_mean_seconds"),
    Figure("ttft_p50_s", "ttft_s.p50", "TTFT p50 ms", unit="ms", scale=1000.0, better=LOW, meaning="median TTFT.",
           interval="ttft_s.p50", repeat=True, live="loadgen_cell_ttft_p50_seconds", compare=Shown.ALWAYS, width=12,
           term="ttft_p50", aliases=("ttft_p50_s", "ttft_p50_ms")),
    Figure("ttft_p99_s", "ttft_s.p99", "TTFT p99 ms", unit="ms", scale=1000.0, better=LOW, meaning="99th percentile TTFT.",
           live="loadgen_cell_ttft_p99_seconds"),
    Figure("itl_p90_s", "itl_s.p90", "ITL p90 ms", unit="ms", scale=1000.0, better=LOW,
           meaning="90th percentile of the per-token inter-token latency (each chunk's gap spread over its tokens).",
           interval="itl_s.p90", repeat=True, live="loadgen_cell_itl_p90_seconds", compare=Shown.ASKED, width=11,
           term="itl_p90", aliases=("itl_p90_s", "itl_p90_ms")),
    Figure("prefill_tok_s", "prefill_tok_s", "pp tok/s", "tok/s", HIGH, "prefill throughput (prompt tokens/s).",
           fmt=".0f", live="loadgen_cell_prefill_tokens_per_second"),
    Figure("e2e_mean_s", "e2e_s.mean", "E2E s", "s", LOW, "mean end-to-end latency.", fmt=".2f",
           interval="e2e_s.mean", repeat=True, live="loadgen_cell_e2e_mean_seconds"),
    Figure("tokens_per_chunk", "tokens_per_chunk_mean", "tok/chk", "tokens", HIGH,
           "mean output tokens per content chunk.", fmt=".2f", live="loadgen_cell_output_tokens_per_chunk"),
    Figure("accept", "accept_length.value", "accept", "tokens", HIGH, "accept length (best source).", fmt=".2f",
           interval="accept_length.value", repeat=True, live="loadgen_accept_length", compare=Shown.WITH_VALUES,
           width=7, ranked=False),
    Figure("verify_steps_per_s", None, "verify steps/s", "steps/s", HIGH,
           "verify steps per second of the cell = output tok/s / accept length (definitions.md#verify-steps).",
           fmt=".0f", derive=_verify_steps_per_s, inputs=("output_tok_s", "accept_length.value")),
    Figure("step_ms", None, "ms/step", "ms", LOW,
           "one verify step as a request sees it = 1000 × the mean gap between its decode steps.",
           derive=_step_ms, inputs=("steps.step_itl_s.mean",)),
    Figure("full_draft_share", None, "full draft", "fraction", NEITHER,
           "share of verify steps that accepted every draft position (what limits the accept length).",
           fmt=".0%", derive=_full_draft_share, inputs=("accept_by_position",)),
    Figure("power_w", "power.mean_w_total", "W", "W", LOW, "mean total GPU power.", fmt=".0f",
           live="loadgen_gpu_power_watts", compare=Shown.WITH_VALUES, width=6),
    Figure("j_per_token", "power.j_per_output_token", "J/tok", "J/tok", LOW, "GPU energy per output token.",
           fmt=".3f", live="loadgen_energy_per_output_token_joules", compare=Shown.WITH_VALUES, width=7),
    Figure("tokens_per_j", "power.output_tokens_per_j", "tok/J", "tok/J", HIGH, "output tokens per joule.",
           live="loadgen_output_tokens_per_joule"),
    Figure("power_fraction", "power.power_fraction_of_limit", "power/limit", "fraction", NEITHER,
           "mean GPU power as a fraction of the power limit.", fmt=".0%",
           live="loadgen_cell_gpu_power_per_limit_ratio"),
    Figure("gpu_utilization", "gpu_activity.total.utilization_percent", "GPU%", "%", NEITHER,
           "GPU utilization, mean over the window and the GPUs (%, as DCGM_FI_DEV_GPU_UTIL).", fmt=".0f",
           live="loadgen_cell_gpu_utilization_percent"),
    Figure("gpu_sm_clock", "gpu_activity.total.sm_clock_fraction", "SM clk", "fraction", NEITHER,
           "mean SM clock as a fraction of the GPUs' maximum.", fmt=".0%", live="loadgen_cell_gpu_sm_clock_per_max_ratio"),
    Figure("gpu_power_capped", "gpu_activity.total.power_cap_fraction", "pwr cap", "fraction", LOW,
           "share of the window the GPUs' clocks were held by the power cap.", fmt=".0%",
           live="loadgen_cell_gpu_power_capped_ratio"),
    Figure("gpu_dram_active", "gpu_activity.total.dram_active", "DRAM", "fraction", NEITHER,
           "mean DCGM_FI_PROF_DRAM_ACTIVE (memory interface busy).", fmt=".0%",
           live="loadgen_cell_gpu_dram_active_ratio"),
    Figure("gpu_tensor_active", "gpu_activity.total.tensor_active", "tensor", "fraction", NEITHER,
           "mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (tensor pipes busy).", fmt=".0%",
           live="loadgen_cell_gpu_tensor_active_ratio"),
    Figure("loop_lag_p99_s", "client.loop_lag_p99_s", "loop lag p99 ms", unit="ms", scale=1000.0, better=LOW,
           meaning="p99 event-loop lag of the client.", live="loadgen_cell_event_loop_lag_p99_seconds"),
    Figure("client_saturated", "client.saturated", "saturated", "bool", LOW,
           "1 when the client was saturated (its figures are invalid).", fmt=".0f",
           live="loadgen_cell_client_saturated"),
)
FIGURES = {f.key: f for f in CATALOG}
COMPARED = tuple(f for f in CATALOG if f.compare is not None)  # compare's figures, every one gated
KEY_FIGURES = tuple(f.path for f in CATALOG if f.repeat and f.path)  # averaged by --repeat, given an interval
# a unit → how a `--fail-on` limit may spell it, and its size in that unit (no suffix: the unit itself)
UNITS = {"ms": {"ms": 1.0, "s": 1000.0}, "tok/s": {"tok/s": 1.0}, "W": {"w": 1.0},
         "J/tok": {"j/tok": 1.0, "j": 1.0}, "tokens": {"tokens": 1.0}}


def get(key: str) -> Figure:
    """The figure named `key`; a name of none is an error naming the known ones (never a silent None)."""
    found = FIGURES.get(key)
    if found is None:
        raise KeyError(f"no figure {key!r} in the catalog (loadgen/metrics/catalog.py); known: {', '.join(FIGURES)}")
    return found
