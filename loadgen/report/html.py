"""`loadgen report … --html FILE`: one self-contained page per run or sweep. Plots are embedded PNG data, the
style sheet is inline, there is no script and nothing to fetch: the file can be mailed, archived or opened
offline and reads the same.

Order, for the question "which budget wins, where, and at what power": the simulator banner and problems
first, the answer (per load and objective the winner beyond noise or the tied set, and why), the plots, the full comparison, each configuration's matrix, what failed and why,
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
    matrix_table_html,
    swatch,
)
from loadgen.report.html_tune import Tune, tune_section
from loadgen.report.html_verdict import answer_section
from loadgen.report.knee_text import knee_lines
from loadgen.report.plot_axes import config_colors
from loadgen.report.plots import Plot
from loadgen.results.verdict import verdicts

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

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
        cells = [c for key, c in r.cells.items() if key.request_rate is not None]
        if cells:
            parts += [el("h3", text(r.name)), columns_table(open_table.COLUMNS, cells, data_table="open-loop")]
    return "".join(parts)


def _answers(runs: list[Run], tunes: list[Tune]) -> list[tuple[str, str, str]]:
    """A tune's own answer first (tune.json's), then the verdict across configurations over every cell."""
    colors = config_colors(runs)
    return [*[(f"tune-{i}", f"The tune's answer: the best configuration at each load ({t[0]['name']})",
               tune_section(t, colors)) for i, t in enumerate(tunes)],
            ("answer", "The answer: which configuration wins where, and why" +
             (" (every part, as compare reads them)" if tunes else ""), answer_section(verdicts(runs), colors))]


def render_page(runs: list[Run], sweeps: list[Sweep], base: int, plots: list[Plot], notes: list[str],
                tunes: list[Tune] | None = None, asked: tuple[str, ...] = ()) -> str:
    """The whole page as one string. Configurations that measured no cell appear only under "Failed and
    skipped" (with their reason and diagnostics). A tune's folder puts its own answer (tune.json's) first."""
    measured = [r for r in runs if r.cells]
    problems, n_problems = problems_section(runs, sweeps)
    open_loop = _open_loop(runs)
    categories = category_table(runs)
    sections = [
        *_answers(runs, tunes or []),
        ("plots", "Plots", _plots_section(plots, notes)),
        ("knee", "Where throughput stops growing", _knee_section(measured, config_colors(runs))),
        ("comparison", "Comparison", el("p", text(
            f"Best of each cell marked ★ (highest tok/s; lowest TTFT, W and J/token; accept length is shown, never "
            f"ranked: a larger draft lengthens it by construction); vs base = "
            f"value / {runs[base].name}'s. A cell that was not measured shows no figures; one that was measured "
            "but failed a check (garbage output, a missed SLO, a saturated client) shows its figures marked ! and is "
            "never best."),
            class_="sub")
         + comparison_table(runs, base, asked)),
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
