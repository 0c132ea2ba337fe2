"""The report's tables as HTML: the comparison (best of each cell marked, speed-ups against the baseline) and
each configuration's matrix. Numbers are shown exactly as the terminal shows them; every figure's cell names
the results field it shows (`data-metric`, and `data-scale` when shown in other units: ms = ×1000), so a reader
of the page (the browser test) can check it against the results file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loadgen.record import CellKey, cell_key
from loadgen.report import compare
from loadgen.report import table as matrix_table
from loadgen.report import text_table as tt
from loadgen.report.compare import Run
from loadgen.report.html_build import el, text
from loadgen.report.plot_axes import config_colors
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import check_names, measured, unmeasured
from loadgen.results.cell_view import figure
from loadgen.results.correctness import produced_garbage, verify_text
from loadgen.results.figures import Figures, RequestCounts

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

# the matrix of one configuration: (header, results field, format: a spec, "ms" = seconds in ms)
MATRIX = [
    ("out tok/s", "output_tok_s", ".1f"),
    ("steady out tok/s", "steady.output_tok_s", ".1f"),
    ("req tok/s mean", "request_tok_s.mean", ".1f"),
    ("req tok/s p10", "request_tok_s.p10", ".1f"),
    ("TTFT mean ms", "ttft_s.mean", "ms"),
    ("TTFT p50 ms", "ttft_s.p50", "ms"),
    ("TTFT p99 ms", "ttft_s.p99", "ms"),
    ("prefill tok/s", "prefill_tok_s", ".0f"),
    ("E2E mean ms", "e2e_s.mean", "ms"),
    ("tok/chunk", "tokens_per_chunk_mean", ".2f"),
    ("accept", "accept_length.value", ".2f"),
    ("verify step ms", "steps.step_itl_s.mean", "ms"),  # metrics/verify_steps.step_ms
    ("W (all GPUs)", "power.mean_w_total", ".0f"),
    ("J/tok", "power.j_per_output_token", ".3f"),
]


def prompt_text(ctx: int) -> str:
    """The prompt column: its token count, or "dataset" for cells replaying a --dataset's rows (context 0)."""
    return str(ctx) if ctx else "dataset"


def load_text(ctx_conc_rate: tuple[Any, ...]) -> str:
    conc, rate = ctx_conc_rate[1], ctx_conc_rate[2]
    return f"{rate:g}/s" if rate else str(conc)


def swatch(color: ColorType | None) -> str:
    """A small square in the configuration's plot colour (hex colours only; else nothing)."""
    return el("span", "", class_="swatch", style=f"background:{color}") if isinstance(color, str) else ""


def _figure_td(value: float | None, spec: str, metric: str, best: bool = False, noise: bool = False,
               checks: str = "") -> str:
    """A figure's cell: marked best (★), within noise (≈), or measured in a cell that failed `checks` (!)."""
    shown = tt.fmt_ms(value) if spec == "ms" else tt.fmt(value, spec)
    checked = bool(checks) and value is not None
    classes = "num best" if best else "num checked" if checked else "num noise" if noise else "num"
    title = ("best of this cell beyond noise" if best else f"measured; the cell failed a check: {checks}" if checked
             else "within noise of the cell's leader" if noise else None)
    return el("td", text(shown), class_=classes, data_metric=metric, data_scale="1000" if spec == "ms" else None,
              title=title)


def _head(columns: list[str], numeric_from: int) -> str:
    return el("thead", el("tr", "".join(el("th", text(h), class_="num" if i >= numeric_from else None, scope="col")
                                        for i, h in enumerate(columns))))


def _row_classes(first: bool, cell: CellResult, baseline: bool = False) -> str | None:
    """'group-start', 'unusable' (not measured), 'checked' (measured, a check failed), 'baseline'."""
    state = "unusable" if not measured(cell) else "checked" if check_names(cell) else ""
    return " ".join(c for c in ("group-start" if first else "", state, "baseline" if baseline else "") if c) or None


def _comparison_row(row: compare.Row, cell: CellResult, first: bool, color: ColorType | None, metrics: list[str]) -> str:
    key = cell_key(row)
    checks = ", ".join(row["checks"])
    tds = [el("td", text(prompt_text(key[0])) if first else "", class_="num"),
           el("td", text(load_text(key)) if first else "", class_="num"),
           el("td", swatch(color) + text(row["config"]), class_="config")]
    for m in metrics:
        shown = compare.METRICS[m]
        tds.append(_figure_td(row[m], "ms" if shown.scale == 1000.0 else shown.fmt, m, m in row["best"],
                              m in row["noise"], checks))
        if m in compare.SPEEDUPS:
            x = row[m + "_x"]
            tds.append(el("td", text(tt.MISSING if x is None else f"{x:.2f}x"), class_="num",
                          data_metric=m + "_x"))
    status = compare.row_note(row)
    tds.append(el("td", text(status), class_="note"))
    return el("tr", "".join(tds), class_=_row_classes(first, cell, row["baseline"]), data_config=row["config"],
              data_ctx=key[0], data_concurrency=key[1], data_rate=key[2] or None,
              data_measured="yes" if row["measured"] else "no", data_checks=checks or None)


def comparison_table(runs: list[Run], base: int, asked: Sequence[str] = ()) -> str:
    """Every cell × configuration; the best value of each figure within a cell marked (class "best"); the
    figures of `compare.shown_metrics`, every one only some servers give among them."""
    rows = compare.comparison(runs, base)
    cells = {(r.name, k): c for r in runs for k, c in r.cells.items()}
    colors = config_colors(runs)
    head = ["prompt", "load", "configuration"]
    metrics = compare.shown_metrics(rows, asked, keep_empty=True)
    for m in metrics:
        head.append(compare.METRICS[m].title)
        if m in compare.SPEEDUPS:
            head.append("vs base")
    head.append("note")
    body, prev = [], None
    for row in rows:
        key = cell_key(row)
        body.append(_comparison_row(row, cells[(row["config"], key)], key != prev, colors.get(row["config"]),
                                    metrics))
        prev = key
    table = el("table", _head(head, 3) + el("tbody", "".join(body)), class_="data", data_table="comparison")
    return el("div", table, class_="scroll")


def _matrix_row(key: CellKey, cell: CellResult, verify: bool = False) -> str:
    """The cell's figures (marked when a check failed), and below them (full width) its notes when it has any."""
    why = unmeasured(cell)
    checks = "" if why else check_names(cell)
    wall = cell.load.wall_clock or {}
    when = f"measured {wall['start']} → {wall['end']}" if wall.get("start") and wall.get("end") else None
    tds = [el("td", text(prompt_text(key[0])), class_="num"),
           el("td", text(load_text(key)), class_="num", title=when),
           el("td", text(tt.ok_failed(cell)), class_="num")]
    for _, metric, spec in MATRIX:
        tds.append(_figure_td(figure(cell, metric), spec, metric, checks=checks))
    tds.append(el("td", text((cell.accept.accept_length or {}).get("source") or "")))
    if verify:  # --verify: garbage / differing / exact outputs of the cell, as the terminal's verify column
        tds.append(el("td", text(verify_text(cell)), data_metric="correctness",
                      class_="bad" if produced_garbage(cell) else None))
    classes = _row_classes(False, cell)
    row = el("tr", "".join(tds), class_=classes, data_ctx=key[0], data_concurrency=key[1],
             data_rate=key[2] or None, data_measured="no" if why else "yes", data_checks=checks or None)
    note = matrix_table.notes(cell)
    if note:
        row += el("tr", el("td", text(note), colspan=len(MATRIX) + 4 + verify, class_="note"),
                  class_=f"note-row {classes or ''}".strip())
    return row


def matrix_table_html(run: Run) -> str:
    """One configuration's cells, in (prompt, load) order, with the terminal matrix's figures."""
    verify = matrix_table.verified(list(run.cells.values()))
    head = ["prompt", "load", "ok/fail", *(h for h, _, _ in MATRIX), "accept source", *(["verify"] if verify else [])]
    body = "".join(_matrix_row(key, cell, verify) for key, cell in sorted(run.cells.items()))
    table = el("table", _head(head, 2) + el("tbody", body), class_="data matrix", data_table="matrix",
               data_config=run.name)
    return el("div", table, class_="scroll")


def columns_table(columns: list[tt.Column], items: Sequence[Any], **kw: object) -> str:
    """Any terminal table (a list of Columns) as HTML, texts as the terminal shows them."""
    head = el("thead", el("tr", "".join(el("th", text(c.header), scope="col") for c in columns)))
    body = "".join(el("tr", "".join(el("td", text(t), class_="num" if c.width > 0 else None)
                                    for c, t in zip(columns, tt.texts(columns, item)))) for item in items)
    return el("div", el("table", head + el("tbody", body), class_="data", **kw), class_="scroll")


CATEGORY = [("output share", "output_share", "pct"), ("out tok/s", "output_tok_s", ".1f"),
            ("req tok/s mean", "request_tok_s.mean", ".1f"), ("TTFT p50 ms", "ttft_s.p50", "ms"),
            ("accept", "accept_length.value", ".2f")]


def _category_row(run: Run, key: CellKey, name: str, fig: Figures, checks: str = "") -> str:
    requests: RequestCounts = fig.get("requests") or {}
    tds = [el("td", text(run.name)), el("td", text(prompt_text(key[0])), class_="num"),
           el("td", text(load_text(key)), class_="num"), el("td", text(name)),
           el("td", text(tt.counts_text(requests)), class_="num")]
    for _, metric, spec in CATEGORY:
        value = tt.field(fig, metric)
        shown = tt.fmt(None if value is None else value * 100, ".0f") + "%" if spec == "pct" else None
        tds.append(el("td", text(shown), class_="num") if shown else _figure_td(value, spec, metric, checks=checks))
    return el("tr", "".join(tds), class_="checked" if checks else None, data_checks=checks or None,
              data_config=run.name, data_ctx=key[0], data_concurrency=key[1],
              data_rate=key[2] or None, data_category=name)


def category_table(runs: list[Run]) -> str:
    """Per configuration × measured cell × prompt category (`by_category`), or "" when no cell has categories."""
    rows = [_category_row(r, key, name, fig, check_names(cell)) for r in runs
            for key, cell in sorted(r.cells.items())
            if measured(cell) for name, fig in (cell.prompts.by_category or {}).items()]
    if not rows:
        return ""
    head = ["configuration", "prompt", "load", "category", "ok/fail", *(h for h, _, _ in CATEGORY)]
    table = el("table", _head(head, 4) + el("tbody", "".join(rows)), class_="data", data_table="categories")
    return el("div", table, class_="scroll")
