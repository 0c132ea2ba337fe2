"""`loadgen report RESULTS… [--plots DIR] [--html FILE]`: the comparison table, the plots as PNG files, and
one self-contained HTML page (loadgen/report/html.py). The plots are drawn once (loadgen/report/plots.py)
and the same bytes go to the files and into the page."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from loadgen.files import write_atomic
from loadgen.report.compare import Run

if TYPE_CHECKING:
    from loadgen.report.plots import Plot


def write_plots(plots: list[Plot], out_dir: str) -> list[str]:
    """Write each plot as `out_dir/<name>`; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for plot in plots:
        path = os.path.join(out_dir, plot.name)
        write_atomic(path, plot.png)
        written.append(path)
    return written


def plots_available() -> bool:
    """Whether matplotlib is importable (it is a default dependency; a bare checkout may lack it)."""
    try:
        import matplotlib  # noqa: F401  (only the plots need it)
    except ImportError:
        return False
    return True


def write_report(runs: list[Run], inputs: list[str], base: int, plots_dir: str | None,
                 html_path: str | None, asked: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """Draw the plots once; write them to `plots_dir` and/or embed them in the page at `html_path` (its
    comparison with the figures shown when asked that `asked` names: `compare.shown_metrics`).
    Returns (paths written, notes). Without matplotlib the page is still written, without plots, and a note
    says how to install it."""
    notes: list[str] = []
    plots: list[Plot] = []
    if plots_available():
        from loadgen.report.plots import render
        plots, notes = render(runs, base)
    else:
        notes.append("plots need matplotlib, which this install lacks: pip install matplotlib (in a checkout: "
                     "pip install -e .)")
    written = write_plots(plots, plots_dir) if plots_dir and plots else []
    if html_path:
        from loadgen.report.html import render_page
        from loadgen.report.html_meta import sweep_summaries
        from loadgen.report.html_tune import tune_documents
        page = render_page(runs, sweep_summaries(inputs), base, plots, notes, tune_documents(inputs), asked)
        write_atomic(html_path, page.encode("utf-8"))
        written.append(html_path)
    return written, notes
