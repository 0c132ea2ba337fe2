"""The report's plots, each as PNG bytes with its file name and title: the HTML page embeds them, `--plots DIR`
writes them. A plot without data is not drawn; a note says which and why.

    output_tok_s.png          aggregate output tok/s vs concurrency (a panel per prompt length)
    speedup.png               output and per-request tok/s ÷ the baseline's, vs concurrency (2+ configurations)
    request_tok_s.png         per-request decode tok/s vs concurrency: mean, band down to p10
    ttft.png                  TTFT p50 (solid) and p99 (dashed) vs concurrency, ms
    accept_length.png         accept length per configuration and per source
    power.png                 mean power per GPU against its limit, and J per output token, vs concurrency
    gpu.png                   GPU utilization and power as % of the limit vs concurrency (the bottleneck's evidence)
    accept_categories.png     accept length per prompt category (runs with categories)
    open_loop.png             open-loop cells: output tok/s and TTFT p99 (from the intended send) vs rate
    pareto.png                per-request tok/s against output tok/s per concurrency, Pareto frontier, the SLO
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loadgen.metrics.bottleneck import SERVER_HOST_UTIL_PERCENT
from loadgen.report import plot_data as pd
from loadgen.report.compare import Run
from loadgen.report.plots_bars import accept_categories, accept_sources
from loadgen.report.plots_load import Layer, Row, grid
from loadgen.report.plots_pareto import pareto
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import measured
from loadgen.results.cell_view import value

NO_POWER = "no cell has power data (measure with --dcgm URL or --nvml)"
NO_GPU = "no cell has GPU utilization (--dcgm URL or --nvml)"
NO_CLOSED = "no measured closed-loop cell"


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    png: bytes


def _ms(get: pd.Getter) -> pd.Getter:
    def ms(cell: CellResult) -> float | None:
        v = get(cell)
        return None if v is None else v * 1e3
    return ms


def _throughput(runs: list[Run]) -> bytes | None:
    series = pd.series_vs_concurrency(runs, pd.path("output_tok_s"))
    return grid(runs, [Row("output tok/s (all requests)", [Layer(series)])],
                "Aggregate output throughput vs concurrency", "concurrency (requests in flight)",
                pd.check_marks(runs)) if series else None


def _speedup(runs: list[Run], base: int) -> bytes | None:
    if len(runs) < 2:
        return None
    name = runs[base].name
    out = pd.speedup_vs_concurrency(runs, base, "out_tok_s")
    req = pd.speedup_vs_concurrency(runs, base, "req_tok_s")
    rows = [Row(f"output tok/s ÷ {name}'s", [Layer(out)], reference=(1.0, f"{name} = 1")),
            Row(f"per-request tok/s ÷ {name}'s", [Layer(req)], reference=(1.0, f"{name} = 1"))]
    return grid(runs, rows, f"Speed-up against {name} vs concurrency (above 1: faster than {name})",
                "concurrency (requests in flight)", pd.check_marks(runs)) if out else None


def _per_request(runs: list[Run]) -> bytes | None:
    series = pd.band_vs_concurrency(runs, pd.path("request_tok_s", "mean"), pd.path("request_tok_s", "p10"))
    rows = [Row("tok/s per request", [Layer(series, name="mean")], band_name="band: p10 to mean")]
    return grid(runs, rows, "Per-request decode speed vs concurrency (mean, band down to p10)",
                "concurrency (requests in flight)", pd.check_marks(runs)) if series else None


def _ttft(runs: list[Run]) -> bytes | None:
    p50 = pd.series_vs_concurrency(runs, _ms(pd.path("ttft_s", "p50")))
    p99 = pd.series_vs_concurrency(runs, _ms(pd.path("ttft_s", "p99")))
    rows = [Row("TTFT (ms)", [Layer(p50, "-", "p50"), Layer(p99, "--", "p99")], log_ratio=30)]
    return grid(runs, rows, "Time to first token vs concurrency", "concurrency (requests in flight)",
                pd.check_marks(runs)) if p50 else None


def _power(runs: list[Run]) -> bytes | None:
    watts = pd.series_vs_concurrency(runs, pd.per_gpu(pd.path("power", "mean_w_total")))
    j_tok = pd.series_vs_concurrency(runs, pd.path("power", "j_per_output_token"))
    limit = pd.power_limit_per_gpu(runs)
    rows = [Row("mean power per GPU (W)", [Layer(watts)], reference=(limit, f"limit {limit:g} W") if limit else None),
            Row("energy per output token (J)", [Layer(j_tok)])]
    rows = [row for row in rows if row.layers[0].series]
    return grid(runs, rows, "GPU power against its limit, and energy per token",
                "concurrency (requests in flight)", pd.check_marks(runs)) if rows else None


def _pct(get: pd.Getter) -> pd.Getter:
    def pct(cell: CellResult) -> float | None:
        v = get(cell)
        return None if v is None else 100 * v
    return pct


def _gpu(runs: list[Run]) -> bytes | None:
    util = pd.series_vs_concurrency(runs, pd.path("gpu_activity", "total", "utilization_percent"))
    power = pd.series_vs_concurrency(runs, _pct(pd.path("power", "power_fraction_of_limit")))
    rows = [Row("GPU utilization (%)", [Layer(util)], reference=(SERVER_HOST_UTIL_PERCENT, "below: server_host")),
            Row("power (% of the limit)", [Layer(power)], reference=(100.0, "limit"))]
    rows = [row for row in rows if row.layers[0].series]
    return grid(runs, rows, "GPU utilization and power vs concurrency (why is it slow?)",
                "concurrency (requests in flight)", pd.check_marks(runs)) if util and rows else None


def _open_loop(runs: list[Run]) -> bytes | None:
    tput = pd.series_vs_rate(runs, pd.path("output_tok_s"))
    p99 = pd.series_vs_rate(runs, _ms(pd.path("ttft_from_intended_s", "p99")))
    rows = [Row("output tok/s", [Layer(tput)]), Row("TTFT p99 from intended send (ms)", [Layer(p99)], log_ratio=30)]
    return grid(runs, rows, "Open loop: throughput and latency vs request rate",
                "scheduled request rate (requests/s)", pd.check_marks(runs, over_rate=True)) if tput else None


def _accept(runs: list[Run]) -> bytes | None:
    data = pd.accept_by_source(runs)
    return accept_sources(runs, data, pd.chosen_sources(runs)) if data else None


def _categories(runs: list[Run]) -> bytes | None:
    data = pd.accept_by_category(runs)
    return accept_categories(runs, data) if data else None


Drawing = Callable[..., bytes | None]  # (runs), or (runs, base) for the speed-up
WhyMissing = str | Callable[[list[Run]], str] | None

# (file, title, drawing, why it may be missing: None = not worth a note when absent)
PLOTS: list[tuple[str, str, Drawing, WhyMissing]] = [
    ("output_tok_s.png", "Aggregate output tok/s", _throughput, NO_CLOSED),
    ("speedup.png", "Speed-up against the baseline", _speedup, None),
    ("request_tok_s.png", "Per-request tok/s", _per_request, NO_CLOSED),
    ("ttft.png", "Time to first token", _ttft, NO_CLOSED),
    ("accept_length.png", "Accept length", _accept, "no measured cell has an accept length"),
    ("power.png", "Power and energy", _power, lambda runs: _missing(runs, "power", "power data", NO_POWER)),
    ("gpu.png", "GPU utilization and power", _gpu,
     lambda runs: _missing(runs, "gpu_activity", "GPU utilization", NO_GPU)),
    ("accept_categories.png", "Accept length per category", _categories, None),
    ("open_loop.png", "Open loop", _open_loop, None),
    ("pareto.png", "Interactivity against throughput", pareto, None),
]


def _missing(runs: list[Run], part: str, what: str, why: str) -> str:
    """Why a plot of the cells' `part` is missing: `why`, unless cells that were not measured hold it (then
    it says so: a failed measurement's figures are not drawn)."""
    held = sum(1 for r in runs for c in r.cells.values() if value(c, part) and not measured(c))
    return why if not held else f"no measured cell has {what} ({held} not measured have it: not drawn)"


def render(runs: list[Run], base: int = 0) -> tuple[list[Plot], list[str]]:
    """Every plot with data, in PLOTS order (speed-ups against runs[base]); notes on the ones left out."""
    from loadgen.report.plot_axes import use_agg
    use_agg()
    plots, notes = [], []
    for name, title, draw, why in PLOTS:
        png = draw(runs, base) if draw is _speedup else draw(runs)
        if png:
            plots.append(Plot(name, title, png))
        elif why:
            notes.append(f"{name} not written: {why(runs) if callable(why) else why}")
    return plots, notes
