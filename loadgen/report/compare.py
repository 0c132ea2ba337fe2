"""`loadgen compare A.json B.json …`: every configuration × cell side by side, the best marked, speed-ups
against a baseline. Inputs are results files (loadgen.results/v1) or sweep folders / sweep.json files,
which stand for their configurations in sweep order. Pure functions from documents to rows to text."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Collection
from enum import StrEnum
from typing import Any

from loadgen.console import WIDTH
from loadgen.metrics.catalog import COMPARED, Figure, Shown
from loadgen.names import CellStatus
from loadgen.record import CellKey, cell_key
from loadgen.report import category_compare
from loadgen.report import text_table as tt
from loadgen.report.compare_machine import render_csv, render_json
from loadgen.report.knee_text import knee_summary
from loadgen.report.text_table import Column
from loadgen.report.verdict_text import verdict_lines
from loadgen.results.best import mark_best
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import failed_checks, not_best, unmeasured
from loadgen.results.cell_view import catalog_figure
from loadgen.results.compare_inputs import Run, load_inputs, pick_baseline
from loadgen.results.objectives import SPECS
from loadgen.results.slo_part import attainment_text
from loadgen.results.verdict import RESOLUTION, BetweenRuns, configurations, verdicts

__all__ = ["Run", "TableFormat", "comparison", "compare_table", "load_inputs", "pick_baseline", "render_text"]

Row = dict[str, Any]  # a comparison row: one configuration's cell, its figures and marks (`cell_row`)

# compare's figures: the catalog's compared ones (metrics/catalog.py), by key, each with its column, unit,
# direction and interval
METRICS: dict[str, Figure] = {f.key: f for f in COMPARED}
SPEEDUPS = tuple(f.key for f in COMPARED if f.speedup)
# figure → the path of its confidence interval in the cell's `intervals` (figures without one: power, energy)
INTERVALS = {f.key: f.interval for f in COMPARED if f.interval}
# figure → the verdict's objective: its marks judge the objective's figure (out tok/s: sustained) and interval, with
# the noise between runs (`verdict.BetweenRuns`) added
OBJECTIVE_OF = {spec.figure: objective for objective, spec in SPECS.items()}


def _shown(f: Figure, rows: list[Row], asked: Collection[str], keep_empty: bool) -> bool:
    """Whether compare's tables give figure `f` a column (`catalog.Shown`)."""
    if f.compare is Shown.WITH_SLO:
        return any(row["slo"] for row in rows)
    if f.compare is Shown.WITH_VALUES:
        return keep_empty or any(row.get(f.key) is not None for row in rows)
    return f.compare is Shown.ALWAYS or f.key in asked or f.name in asked


def shown_metrics(rows: list[Row], asked: Collection[str] = (), keep_empty: bool = False) -> list[str]:
    """The METRICS a comparison of `rows` shows in a table: the SLO's only when a row has SLO figures, a figure
    only some servers give (accept length, power) only when a row has it (always with `keep_empty`: the HTML
    page's columns), one shown when asked only when `asked` names it (by its key or its --fail-on name)."""
    return [m for m, f in METRICS.items() if _shown(f, rows, asked, keep_empty)]


def cell_row(r: Run, key: CellKey, cell: CellResult, base: Run) -> Row:
    """The comparison row of one configuration's cell (see `comparison`); `slo` is the cell's typed part."""
    why = unmeasured(cell)  # not measured: no figures, never best
    ok = why is None
    checks = failed_checks(cell) if ok else []  # measured, a check failed: figures shown, marked, never best
    failed = not ok or cell.status != CellStatus.OK
    row: Row = {"context_tokens": key[0], "concurrency": key[1], "request_rate": key[2] or None, "config": r.name,
           "status": "failed" if failed else "ok", "measured": ok, "error": why or cell.error,
           "checks": [c.kind.value for c in checks], "check_reasons": [c.reason for c in checks],
           "not_best": not_best(cell), "slo": cell.slo, "baseline": r is base, "best": [], "noise": [],
           "intervals": {}, "repeated": bool(cell.noise.repeats), "judged": {}}
    for m in METRICS:
        row[m] = catalog_figure(cell, m) if ok else None
        if ok and m in INTERVALS:
            row["intervals"][m] = (cell.noise.intervals or {}).get(INTERVALS[m])
        if ok and row[m] is not None and m in OBJECTIVE_OF:
            spec = SPECS[OBJECTIVE_OF[m]]
            row["judged"][m] = (spec.value(cell), spec.interval_of(cell))
    base_cell = base.cells.get(key)
    for m in SPEEDUPS:
        b = catalog_figure(base_cell, m) if base_cell and unmeasured(base_cell) is None else None
        row[m + "_x"] = row[m] / b if row[m] is not None and b else None
    return row


def comparison(runs: list[Run], base: int = 0) -> list[Row]:
    """One row per cell × configuration, cells in (context, concurrency) order.

    Each row: context_tokens, concurrency, config, status (failed: not measured, or a check failed the cell),
    measured (`cell_status.measured`), error, checks and check_reasons (the checks a measured cell failed:
    `cell_status.failed_checks`), not_best (why it may not be best; `cell_status.not_best`), one value per
    METRICS key (None when the cell lacks it or was not measured; a measured cell that failed a check keeps
    its figures) with its 95 % interval (`intervals`), `<metric>_x` = value / baseline's value for SPEEDUPS,
    `best`: the metrics in which this configuration is the best of the cell beyond noise, and `noise`: those
    in which it is within noise of the cell's leader (no best named; `mark_best`)."""
    keys = sorted({k for r in runs for k in r.cells})
    between = {m: BetweenRuns.of(runs, SPECS[o].drift) for m, o in OBJECTIVE_OF.items()}
    rows = []
    for key in keys:
        group = [cell_row(r, key, r.cells[key], runs[base]) for r in runs if key in r.cells]
        mark_best(group, {m: f.better for m, f in METRICS.items() if f.ranked}, between=between)
        rows += group
    return rows


CHECK_MARK = "!"  # a measured figure of a cell that failed a check: shown, never best; its note says why


def figure_mark(row: Row, m: str) -> str:
    """The mark after figure `m` of a comparison row: "*" best of its cell, "!" its cell failed a check,
    "~" within noise of the leader, else " "."""
    return "*" if m in row["best"] else CHECK_MARK if row["checks"] else "~" if m in row["noise"] else " "


def _metric(m: str) -> Callable[[Row], str]:
    """The text of metric `m` in a comparison row, with its mark (`figure_mark`)."""
    def text(row: Row) -> str:
        v = row.get(m)
        if v is None:
            return tt.MISSING
        return f"{METRICS[m].text(v)}{figure_mark(row, m)}"
    return text


def _speedup(m: str) -> Callable[[Row], str]:
    """The text of `<m>_x`, the speed-up against the baseline."""
    return lambda row: tt.MISSING if row.get(m + "_x") is None else f"{row[m + '_x']:.2f}x"


def _load(row: Row) -> str:
    return f"{row['request_rate']:g}/s" if row.get("request_rate") else str(row["concurrency"])


def row_note(row: Row) -> str:
    """'FAILED: the server went away' (not measured), 'FAILED CHECK, never best: GARBAGE OUTPUT: …' (measured,
    failed by a check), 'never best: missed its SLO (…)' (measured and ok, a check failed), or ''."""
    if not row["measured"]:
        return f"FAILED: {row['error'] or ''}"
    if not row["check_reasons"]:
        return ""
    failed = "FAILED CHECK, " if row["status"] != CellStatus.OK else ""
    return f"{failed}never best: {'; '.join(row['check_reasons'])}"


def _slo(row: Row) -> str:
    return attainment_text(row["slo"]) or tt.MISSING


def figure_columns(f: Figure) -> list[Column]:
    """A compared figure's columns: its value (`Figure.column`, `Figure.width`), its speed-up against the baseline
    where it has one, the SLO's attainment after the SLO's figure."""
    cols = [Column(f.column, f.width, _metric(f.key))]
    cols += [Column("vs base", 8, _speedup(f.key))] if f.speedup else []
    return cols + ([Column("SLO", 9, _slo)] if f.compare is Shown.WITH_SLO else [])


HEAD = [tt.CONTEXT, Column("conc", 5, _load), Column("configuration", -24, lambda row: _config_text(row))]
NOTE = Column("note", 0, row_note)


def _config_text(row: Row) -> str:
    config: str = row["config"]
    return config + (" (base)" if row["baseline"] else "")


def columns(rows: list[Row], asked: Collection[str] = ()) -> list[Column]:
    """The comparison's columns: each shown figure's (`shown_metrics`: with SLO figures in any row, good tok/s
    and the attainment follow out tok/s; accept, W and J/tok only when some row has them; a figure shown when
    asked when `asked` names it), in the catalog's order; the configuration as wide as its longest name (the rows
    then fit 120 columns more often)."""
    cols = [*HEAD, *(c for m in shown_metrics(rows, asked) for c in figure_columns(METRICS[m])), NOTE]
    width = max([len("configuration"), *(len(_config_text(r)) for r in rows)])
    return [Column(c.header, -width, c.text) if c.header == "configuration" else c for c in cols]


# left out in this order (a "vs base": the rightmost, req tok/s's first) while the text table is wider than WIDTH
FIT_ORDER = ("W", "vs base", "accept", "vs base", "req tok/s mean")


def _fitted(cols: list[Column]) -> list[Column]:
    """The text table's `cols`: less the FIT_ORDER columns, one by one, while the header (as wide as a row) is
    wider than WIDTH (the Markdown table keeps them all)."""
    for name in FIT_ORDER:
        found = [i for i, c in enumerate(cols) if c.header == name]
        if len(tt.header(cols)) <= WIDTH or not found:
            continue
        cols = cols[:found[-1]] + cols[found[-1] + 1:]
    return cols


def note_refs(rows: list[Row]) -> tuple[list[str], list[str]]:
    """Each row's note reference and the notes as lines "n1 ctx 60 conc 8 b0: …" (`text_table.note_refs`)."""
    return tt.note_refs(rows, row_note, lambda row: f"ctx {tt.context(row)} conc {_load(row)} {row['config']}")


def render_text(rows: list[Row], asked: Collection[str] = ()) -> str:
    """Rows grouped by cell (a blank line between cells; a cell's context and load shown on its first row), each
    row's note as a reference, the notes under the rows; `asked`: figures shown when asked (`shown_metrics`)."""
    cols = _fitted(columns(rows, asked))
    out = [tt.header(cols).rstrip()]
    prev = None
    refs, notes = note_refs(rows)
    for row, ref in zip(rows, refs):
        key = (row["context_tokens"], row["concurrency"], row.get("request_rate"))
        cells = tt.texts(cols, row)
        cells[-1] = ref
        if key == prev:
            cells[0] = cells[1] = ""
        elif prev is not None:
            out.append("")
        prev = key
        out.append(tt.join(cols, cells).rstrip())
    out += [w for n in notes for w in textwrap.wrap(n, 120, subsequent_indent="    ")]
    out += [w for line in legend(rows, "*", asked) for w in textwrap.wrap(line, 120)]
    return "\n".join(out)


def legend(rows: list[Row], mark: str, asked: Collection[str] = ()) -> list[str]:
    """The lines under the comparison: what the marks mean and, when some figure is within noise, how many (a
    figure shown only when asked counts where it was asked for)."""
    slo = any(r["slo"] for r in rows)
    hidden = {f.key for f in COMPARED if f.compare is Shown.ASKED and not _shown(f, rows, asked, False)}
    lines = [f"{mark} best of the cell beyond noise (highest tok/s{', good tok/s' if slo else ''}; "
             f"lowest TTFT, W and J/token; its margin over every other's 95 % interval clear of 0 and ≥ {RESOLUTION:.0%}"
             f"{'; a cell that missed its SLO is never best' if slo else ''}); ~ tied for the lead (within noise or "
             f"below {RESOLUTION:.0%}): no best named; vs base = value / the baseline's"]
    cells = {(cell_key(r), m) for r in rows for m in r["noise"] if m not in hidden}
    named = {(cell_key(r), m) for r in rows for m in r["best"] if m not in hidden}
    checked = sorted({c for r in rows for c in r["checks"]})
    if checked:
        lines.append(f"{CHECK_MARK} measured, but the cell failed a check ({', '.join(checked)}): its figures are "
                     "shown and never best; the note says why")
    if cells:
        lines.append(f"tied: {len(cells)} of {len(cells) + len(named)} compared figures: no leader beyond noise and "
                     f"{RESOLUTION:.0%}, so no best is named")
    if any(any(r["intervals"].values()) and not r["repeated"] for r in rows):
        lines.append("one measurement per cell: its intervals hold the noise between requests, not between runs "
                     "(server state, a busy machine); --repeat 3 measures that too")
    return lines


def render_markdown(rows: list[Row], asked: Collection[str] = ()) -> str:
    cols = columns(rows, asked)
    head = [c.header for c in cols]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"**{c.strip()[:-1]}**" if c.strip().endswith("*") else c.strip() for c in tt.texts(cols, row)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += ["", *legend(rows, "**bold**:", asked)]
    return "\n".join(out)


def _csv(rows: list[Row]) -> str:
    return render_csv(rows, list(METRICS), SPEEDUPS)


class TableFormat(StrEnum):
    """`loadgen compare --format`."""

    TEXT = "text"
    MD = "md"
    CSV = "csv"
    JSON = "json"


def compare_table(runs: list[Run], baseline: str | None, fmt: str = TableFormat.TEXT,
                  resolution: float = RESOLUTION, asked: Collection[str] = ()) -> str:
    """The comparison in `fmt` (every compared figure in CSV and JSON; the tables show `shown_metrics`); text and
    Markdown end with the verdict across configurations."""
    rows = comparison(runs, pick_baseline(runs, baseline))
    fmt = TableFormat(fmt)
    if fmt is TableFormat.JSON:
        return render_json(runs, rows, resolution)
    if fmt is TableFormat.CSV:
        return _csv(rows)
    text = (render_text if fmt is TableFormat.TEXT else render_markdown)(rows, asked)
    by_category = category_compare.render(runs, pick_baseline(runs, baseline)) if fmt is TableFormat.TEXT else None
    knee = [line for r in runs if (line := knee_summary(list(r.cells.values()), r.name))]
    answer = "\n".join(verdict_lines(verdicts(runs, resolution), WIDTH)) if len(configurations(runs)) > 1 else ""
    if fmt is TableFormat.MD:
        return "\n\n".join(t for t in (text, *knee, answer) if t)
    return "\n".join(t for t in (text, by_category, *knee, "", answer) if t is not None).rstrip()
