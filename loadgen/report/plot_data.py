"""What the report's plots draw, as plain data (pure: runs in, numbers out; tested without matplotlib).

Every series holds measured cells only (`cell_status.measured`): a skipped cell, a failed measurement (the
server went away, nothing succeeded) or a cell with too many failed requests is left out, never drawn as zero.
A measured cell that failed a check (garbage output, a missed SLO, a saturated client, an output mismatch)
stays in, and `check_marks` names it, so the plot draws it marked (hollow, the reason in the legend).
Closed-loop cells are placed by concurrency, open-loop cells by their scheduled request rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from loadgen.names import AcceptSource
from loadgen.report.compare import Run, comparison
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import check_names, measured
from loadgen.results.cell_view import number

Getter = Callable[[CellResult], float | None]


def _number(*candidates: object) -> float | None:
    for v in candidates:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                continue
    return None


def prompt_label(ctx: int) -> str:
    """A panel's or row's prompt: 'prompt 1024 tokens'; context 0 marks cells replaying a --dataset's rows."""
    return "dataset rows" if not ctx else f"prompt {ctx} tokens"


def sim_speed(run: Run) -> float | None:
    """The simulator's time compression (its /server_info `sim_speed`), None for a real server."""
    return _number(run.server_info.get("sim_speed"))


def path(*keys: str) -> Getter:
    """A getter of the figure `k0.k1…` of a cell (`cell_view.number`: None when a step is missing)."""
    dotted = ".".join(keys)
    return lambda cell: number(cell, dotted)


def per_gpu(get: Getter) -> Getter:
    """A power figure of the cell divided by its GPU count (W per GPU)."""
    def each(cell: CellResult) -> float | None:
        total, gpus = get(cell), (cell.telemetry.power or {}).get("gpus")
        return total / gpus if total is not None and gpus else None
    return each


def _closed(run: Run) -> Iterator[tuple[int, int, CellResult]]:
    for (ctx, conc, rate, *_), cell in sorted(run.cells.items()):
        if not rate and measured(cell):
            yield ctx, conc, cell


def _open(run: Run) -> Iterator[tuple[int, float, CellResult]]:
    for (ctx, _, rate, *_), cell in sorted(run.cells.items()):
        if rate and measured(cell):
            yield ctx, rate, cell


Marks = dict[tuple[str, int, float], str]  # (config, context, load) → the checks its cell failed


def check_marks(runs: list[Run], over_rate: bool = False) -> Marks:
    """{(config, context, concurrency — or request rate when `over_rate`): 'garbage output, missed SLO'} for
    the measured cells that failed a check (`cell_status.check_names`); the plots draw those points hollow."""
    cells = _open if over_rate else _closed
    return {(r.name, ctx, x): names for r in runs for ctx, x, cell in cells(r) if (names := check_names(cell))}


def series_vs_concurrency(runs: list[Run], get: Getter) -> dict[int, dict[str, list[tuple[int, float]]]]:
    """{context: {config: [(concurrency, value), …]}} over measured closed-loop cells with a value."""
    out: dict[int, dict[str, list[tuple[int, float]]]] = {}
    for r in runs:
        for ctx, conc, cell in _closed(r):
            v = get(cell)
            if v is not None:
                out.setdefault(ctx, {}).setdefault(r.name, []).append((conc, v))
    return out


def series_vs_rate(runs: list[Run], get: Getter) -> dict[int, dict[str, list[tuple[float, float]]]]:
    """{context: {config: [(request rate /s, value), …]}} over measured open-loop cells with a value."""
    out: dict[int, dict[str, list[tuple[float, float]]]] = {}
    for r in runs:
        for ctx, rate, cell in _open(r):
            v = get(cell)
            if v is not None:
                out.setdefault(ctx, {}).setdefault(r.name, []).append((rate, v))
    return out


def band_vs_concurrency(runs: list[Run], get: Getter,
                        get_low: Getter) -> dict[int, dict[str, list[tuple[int, float, float | None]]]]:
    """{context: {config: [(concurrency, value, low), …]}}: a line and the lower edge of its band."""
    out: dict[int, dict[str, list[tuple[int, float, float | None]]]] = {}
    for r in runs:
        for ctx, conc, cell in _closed(r):
            v = get(cell)
            if v is not None:
                out.setdefault(ctx, {}).setdefault(r.name, []).append((conc, v, get_low(cell)))
    return out


def speedup_vs_concurrency(runs: list[Run], base: int, metric: str) -> dict[int, dict[str, list[tuple[int, float]]]]:
    """{context: {config: [(concurrency, value / baseline's value), …]}}: `compare.comparison`'s `<metric>_x`
    over closed-loop cells where both were measured."""
    out: dict[int, dict[str, list[tuple[int, float]]]] = {}
    for row in comparison(runs, base):
        x = row[metric + "_x"]
        if x is not None and not row["request_rate"]:
            out.setdefault(row["context_tokens"], {}).setdefault(row["config"], []).append((row["concurrency"], x))
    return out


def _spread(values: list[float]) -> tuple[float, float, float]:
    return sum(values) / len(values), min(values), max(values)


def accept_by_source(runs: list[Run]) -> dict[int, dict[str, dict[str, tuple[float, float, float]]]]:
    """{context: {config: {source: (mean, lowest, highest)}}}: each source's accept length over the
    configuration's measured cells (closed and open loop) of that prompt length, sources in AcceptSource order."""
    values: dict[int, dict[str, dict[str, list[float]]]] = {}
    for r in runs:
        for (ctx, *_), cell in sorted(r.cells.items()):
            if not measured(cell):
                continue
            acc = cell.accept.accept_length or {}
            per = dict(acc.get("per_source") or {})
            if (value := acc.get("value")) is not None:
                per.setdefault(acc.get("source") or "value", value)
            for source, v in per.items():
                if isinstance(v, (int, float)):
                    values.setdefault(ctx, {}).setdefault(r.name, {}).setdefault(source, []).append(float(v))
    order: dict[str, int] = {s: i for i, s in enumerate(AcceptSource)}
    return {ctx: {name: {s: _spread(by[s]) for s in sorted(by, key=lambda s: order.get(s, len(order)))}
                  for name, by in configs.items()}
            for ctx, configs in sorted(values.items())}


def chosen_sources(runs: list[Run]) -> list[str]:
    """The sources the cells' accept length values came from (a table reader's "accept" column)."""
    found = {(c.accept.accept_length or {}).get("source") for r in runs for c in r.cells.values() if measured(c)}
    return [s.value for s in AcceptSource if s in found] + sorted(s for s in found - set(AcceptSource) if s)


def _category_values(cell: CellResult) -> dict[str, float]:
    """A cell's per-category accept length: `by_category` (or an older file's `categories`) as {name: figures}
    or [{"category": name, …}]."""
    cats = cell.prompts.by_category or cell.extra.get("categories") or {}
    items = cats.items() if isinstance(cats, dict) else ((c.get("category") or c.get("name"), c) for c in cats)
    out = {}
    for name, fig in items:
        acc = fig.get("accept_length") if isinstance(fig, dict) else fig
        v = acc.get("value") if isinstance(acc, dict) else acc
        if name is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[str(name)] = float(v)
    return out


def accept_by_category(runs: list[Run]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """{config: {category: (mean, lowest, highest)}} of accept length over its measured cells that have
    per-category figures; empty when no cell has any."""
    values: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        for cell in r.cells.values():
            if measured(cell):
                for cat, v in _category_values(cell).items():
                    values.setdefault(r.name, {}).setdefault(cat, []).append(v)
    return {name: {cat: _spread(vs) for cat, vs in sorted(by.items())} for name, by in values.items()}


def power_limit_per_gpu(runs: list[Run]) -> float | None:
    """The highest per-GPU power limit any measured cell reported (W), for the plot's reference line."""
    limits = [lim for r in runs for c in r.cells.values() if measured(c)
              for lim in [per_gpu(path("power", "limit_w_total"))(c)] if lim]
    return max(limits) if limits else None
