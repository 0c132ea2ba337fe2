"""`loadgen report … --html FILE`: one self-contained page per run or sweep. Plots are embedded PNG data, the
style sheet is inline, there is no script and nothing to fetch: the file can be mailed, archived or opened
offline and reads the same.

Order, for the question "which budget wins, where, and at what power": the simulator banner and problems
first, who wins each cell, the plots, the full comparison, each configuration's matrix, what failed and why,
then what was measured where (metadata)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from loadgen import __version__
from loadgen.metrics.knee import KNEE_GROWTH
from loadgen.record import CellKey, cell_key
from loadgen.report import compare, open_table
from loadgen.report.compare import Run
from loadgen.report.html_build import CSS, el, image, text
from loadgen.report.html_meta import Sweep, metadata_section, mismatch_banner, problems_section, sim_banner
from loadgen.report.html_tables import (
    category_table,
    columns_table,
    comparison_table,
    load_text,
    matrix_table_html,
    prompt_text,
    swatch,
)
from loadgen.report.knee_text import knee_lines
from loadgen.report.plot_axes import config_colors
from loadgen.report.plots import Plot
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import check_names, measured
from loadgen.results.cell_view import results_of

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

WINNER_METRICS = ("out_tok_s", "req_tok_s", "ttft_p50_s", "j_per_token")
CAPTIONS = {
    "output_tok_s.png": "All requests' output tokens per second of the measured window. Higher is better. In "
                        "every plot, a hollow point was measured but failed a check (the legend says which): its "
                        "figure stands, it is never best.",
    "speedup.png": "Each configuration's tok/s divided by the baseline's in the same cell: above the line at 1 it "
                   "is faster. Where the lines cross, the best budget changes.",
    "request_tok_s.png": "Decode speed one user sees. Line: mean over requests; shaded band down to the "
                         "slowest 10 % (p10).",
    "ttft.png": "Time to first token: median (solid) and p99 (dashed). Lower is better.",
    "accept_length.png": "Tokens committed per verify step, from every source that measured it; bars of "
                         "different heights for one configuration mean its sources disagree.",
    "power.png": "Top: mean power per GPU with the GPUs' limit dashed (far below the limit = not "
                 "compute-bound). Bottom: energy per output token. Lower is better.",
    "gpu.png": "Top: GPU utilization; below the dashed line at 50 % with requests in flight the server's host side "
               "limits throughput (bottleneck server_host). Bottom: power as a share of the GPUs' limit; at 100 % "
               "the power cap throttles the clocks.",
    "accept_categories.png": "Accept length per prompt category.",
    "open_loop.png": "Open-loop cells against their scheduled request rate; latency from the intended send.",
    "pareto.png": "Each configuration's concurrencies as points of interactivity (mean per-request tok/s) and "
                  "throughput (aggregate output tok/s); the dashed line is the Pareto frontier: no point beats one "
                  "on it in both, joining the cells that passed their checks. Hollow points failed one (missed the "
                  "SLO, garbage output, a saturated client: the legend says which); a TPOT target is the dotted "
                  "line of the interactivity it implies.",
}


def _title(runs: list[Run], sweeps: list[Sweep]) -> str:
    names: list[str] = [d["name"] for d, _ in sweeps if d.get("name")]
    return ", ".join(names) if names else ", ".join(r.name for r in runs)


def _subtitle(runs: list[Run]) -> str:
    starts = sorted(r.doc.get("started_at") or "" for r in runs if r.doc.get("started_at"))
    urls = sorted({(r.doc.get("target") or {}).get("url") or "?" for r in runs})
    engines = sorted({str((r.doc.get("target") or {}).get("engine")) for r in runs})
    models = sorted({str((r.doc.get("target") or {}).get("model")) for r in runs})
    cells = len({k for r in runs for k in r.cells})
    when = f"measured {starts[0][:16].replace('T', ' ')} UTC" if starts else "date unknown"
    return (f"{len(runs)} configuration{'s' * (len(runs) != 1)} × {cells} cells · {when} · "
            f"{', '.join(urls)} · engine {', '.join(engines)} · model {', '.join(models)}")


def _winner(group: list[compare.Row], m: str, colors: dict[str, ColorType]) -> str:
    """'b32 (+6.7 % vs b16)' as HTML: the best configuration(s) of a cell at metric m (each with its plot
    colour) and the margin over the next."""
    best = [r for r in group if m in r["best"]]
    if not best:
        close = [r["config"] for r in group if m in r["noise"]]
        return text(f"within noise: {', '.join(close)}") if close else "-"
    others = sorted((r for r in group if r[m] is not None and m not in r["best"]), key=lambda r: r[m],
                    reverse=compare.METRICS[m][2] == "high")
    names = ", ".join(el("span", swatch(colors.get(r["config"])) + text(r["config"]), class_="who") for r in best)
    if not others or not others[0][m]:
        return names
    margin = best[0][m] / others[0][m] - 1
    shown = f"{margin:+.1%}" if abs(margin) >= 0.0005 else f"{margin:+.2%}"
    return names + " " + el("span", text(f"({shown} vs {others[0]['config']})"), class_="margin")


def winners_table(runs: list[Run], base: int) -> str:
    """Per cell, the configuration best at each headline figure (from compare.comparison's marks), its margin
    over the runner-up, and the configurations that could not be best there and why (`_why_out`)."""
    rows = compare.comparison(runs, base)
    keys = list(dict.fromkeys(_key(r) for r in rows))
    cells = {(r.name, k): c for r in runs for k, c in r.cells.items()}
    any_failed = any(_why_out(c) for c in cells.values())
    shown = compare.shown_metrics(rows)
    metrics = [m for m in ("good_tok_s", *WINNER_METRICS) if m in shown]  # with --slo, goodput first
    head = el("thead", el("tr", el("th", "prompt") + el("th", "load") + "".join(
        el("th", text(compare.METRICS[m][0] + (" (high)" if compare.METRICS[m][2] == "high" else " (low)")))
        for m in metrics) + (el("th", "never best here") if any_failed else "")))
    colors = config_colors(runs)
    body = []
    for key in keys:
        group = [r for r in rows if _key(r) == key]
        tds = [el("td", text(prompt_text(key[0])), class_="num"), el("td", text(load_text(key)), class_="num")]
        tds += [el("td", _winner(group, m, colors), data_metric=m) for m in metrics]
        if any_failed:
            out = [f"{r['config']} ({why})" for r in group if (why := _why_out(cells[(r["config"], key)]))]
            tds.append(el("td", text(", ".join(out)), class_="note"))
        body.append(el("tr", "".join(tds), data_ctx=key[0], data_concurrency=key[1], data_rate=key[2] or None))
    table = el("table", head + el("tbody", "".join(body)), class_="data winners", data_table="winners")
    return el("div", table, class_="scroll")


def _why_out(cell: CellResult) -> str:
    """'not measured', 'garbage output, missed SLO' (the checks a measured cell failed), or '' (a contender)."""
    return "not measured" if not measured(cell) else check_names(cell)


def _winners_section(runs: list[Run], base: int) -> str:
    if not any(row["best"] or row["noise"] for row in compare.comparison(runs, base)):
        return el("p", text("No cell was measured usably by two or more configurations: nothing to rank. The "
                            "figures are in the matrices below."), class_="sub")
    return el("p", text(f"Best of each cell beyond noise (its 95 % interval clear of every other's) among the "
                        f"measured cells that passed their checks; \"within noise\" names the configurations no "
                        f"measurement tells apart. The full figures and speed-ups against {runs[base].name} are "
                        f"in the comparison below."), class_="sub") + winners_table(runs, base)


def _key(row: compare.Row) -> CellKey:
    return cell_key(row)


def _plots_section(plots: list[Plot], notes: list[str]) -> str:
    figs = [el("figure", image(p.png, p.title) + el("figcaption", text(CAPTIONS.get(p.name, ""))),
               id=p.name.removesuffix(".png")) for p in plots]
    left_out = el("ul", "".join(el("li", text(n)) for n in notes), class_="legend-note") if notes else ""
    return "".join(figs) + left_out


def _section(sid: str, title: str, body: str) -> str:
    return el("section", el("h2", text(title)) + body, id=sid)


def _matrices(runs: list[Run], colors: dict[str, ColorType]) -> str:
    return "".join(el("h3", swatch(colors.get(r.name)) + text(r.name)) + matrix_table_html(r) for r in runs)


def _knee_section(runs: list[Run], colors: dict[str, ColorType]) -> str:
    """Per configuration and prompt length, the concurrency past which output tok/s grew < 10 % per doubling."""
    rows = [(r, line) for r in runs for line in knee_lines(list(r.cells.values()))]
    if not rows:
        return el("p", text("No prompt length was measured at two or more concurrencies: no knee to name."),
                  class_="sub")
    head = el("thead", el("tr", el("th", text("configuration")) + el("th", text("knee per prompt length"))))
    body = "".join(el("tr", el("td", swatch(colors.get(r.name)) + text(r.name)) + el("td", text(line)))
                   for r, line in rows)
    note = el("p", text(f"The knee: the concurrency past which output tok/s grows less than {KNEE_GROWTH:.0%} per "
                        "doubling of the load (definitions.md#knee); beyond it, more load mostly adds latency."),
              class_="sub")
    return note + el("table", head + el("tbody", body), class_="data", data_table="knee")


def _open_loop(runs: list[Run]) -> str:
    parts = []
    for r in runs:
        cells = [c for key, c in results_of(r).items() if key.request_rate is not None]
        if cells:
            parts += [el("h3", text(r.name)), columns_table(open_table.COLUMNS, cells, data_table="open-loop")]
    return "".join(parts)


def render_page(runs: list[Run], sweeps: list[Sweep], base: int, plots: list[Plot], notes: list[str]) -> str:
    """The whole page as one string. Configurations that measured no cell appear only under "Failed and
    skipped" (with their reason and diagnostics)."""
    measured = [r for r in runs if r.cells]
    problems, n_problems = problems_section(runs, sweeps)
    open_loop = _open_loop(runs)
    categories = category_table(runs)
    sections = [
        ("winners", "Which configuration wins where", _winners_section(runs, base)),
        ("plots", "Plots", _plots_section(plots, notes)),
        ("knee", "Where throughput stops growing", _knee_section(measured, config_colors(runs))),
        ("comparison", "Comparison", el("p", text(
            f"Best of each cell marked ★ (highest tok/s and accept length; lowest TTFT, W and J/token); vs base = "
            f"value / {runs[base].name}'s. A cell that was not measured shows no figures; one that was measured "
            "but failed a check (garbage output, a missed SLO, a saturated client) shows its figures marked ! and is "
            "never best."),
            class_="sub")
         + comparison_table(runs, base)),
        ("matrices", "Each configuration's matrix", _matrices(measured, config_colors(runs))),
        *([("open-loop", "Open loop", open_loop)] if open_loop else []),
        *([("categories", "Per prompt category", categories)] if categories else []),
        ("problems", "Failed and skipped", problems or el("p", "Every cell of every configuration was measured.")),
        ("metadata", "What was measured, where", metadata_section(measured)),
    ]
    nav = el("nav", "".join(el("a", text(t), href=f"#{sid}") for sid, t, _ in sections), class_="toc")
    alarm = el("div", text(f"{n_problems} failed or skipped item{'s' * (n_problems != 1)}: see Failed and "
                           "skipped below."), class_="banner bad", role="note") if n_problems else ""
    title = _title(runs, sweeps)
    header = el("header", el("h1", text(f"loadgen report: {title}")) + el("p", text(_subtitle(runs)), class_="sub"),
                class_="top")
    footer = el("p", text(f"Written by loadgen {__version__} on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. One "
                          "file: no scripts, nothing fetched."), class_="sub")
    banners = sim_banner(runs) + mismatch_banner(measured) + alarm
    body = header + banners + nav + el("main", "".join(_section(*s) for s in sections) + footer)
    head = ('<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            + el("title", text(f"loadgen report: {title}")) + el("style", CSS))
    return f"<!doctype html>\n<html lang=\"en\">{el('head', head)}{el('body', body)}</html>\n"
