"""The console's view of a run, a sink: the line that heads the matrix, one line on stderr per finished cell
(`table.progress_line`: per repeat of it too, and per cell measured again, named by its tag) and the tables
printed on stdout after the run (`tables`: the matrix, the load's own, the search's answer, the prompt lengths,
the categories, the knee).

A cell measured again outside the matrix (`run/remeasure.py`) is told under the run id `<run id>-<tag>`: its
line is named by the tag ("control ctx=… c=… run 1/2", then "control"), and it takes no number of the
matrix's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loadgen.console import log, table_width
from loadgen.record import CellKey
from loadgen.report.category_table import category_table, lengths_table
from loadgen.report.knee_text import knee_summary
from loadgen.report.table import progress_line, table, title
from loadgen.results.cell_result import CellResult
from loadgen.sinks.base import NullSink

Table = Callable[[list[CellResult]], str | None]  # a table printed after the run (None: nothing to show)


class ConsoleSink(NullSink):
    """The run's lines and tables on the console (module docstring). `tables` are the load's and the run's
    shape's own (open loop, ceiling, the search's answer), printed after the matrix."""

    def __init__(self, label: str | None, repeat: int, wide: bool, tables: Sequence[Table] = ()):
        self.label, self.repeat, self.wide = label, repeat, wide
        self.own_tables = list(tables)
        self.run_id = ""
        self.planned: int | None = None
        self.finished = 0  # the matrix's cells finished so far

    @property
    def tables(self) -> list[Table]:
        """Every table after the run, in order: the matrix, the load's and the shape's, then the prompt lengths,
        the categories and the knee."""
        return [self.matrix, *self.own_tables, lengths_table, category_table, knee_summary]

    def matrix(self, cells: list[CellResult]) -> str:
        return table(cells, title(self.label, self.run_id), wide=self.wide, width=table_width())

    def run_started(self, run_id: str, cells: int | None) -> None:
        self.run_id, self.planned = run_id, cells
        count = "" if cells is None else f": {cells} cell" + ("s" if cells != 1 else "")
        log(title(self.label, run_id) + count + (f" × {self.repeat} repeats" if self.repeat > 1 else ""))

    def tag(self, cell: CellResult) -> str | None:
        """The tag of a cell measured again (None: a cell of the matrix)."""
        run_id = cell.run_id or self.run_id
        return run_id.removeprefix(self.run_id + "-") if run_id != self.run_id else None

    def in_matrix(self) -> str:
        """The matrix's cell in progress: 'cell 3/6', or 'cell 3' when the plan decides as it goes."""
        n = self.finished + 1
        return f"cell {n}/{self.planned}" if self.planned is not None else f"cell {n}"

    def repeat_finished(self, cell: CellKey, result: CellResult, repeat: int) -> None:
        tag = self.tag(result)
        done = self.in_matrix() if tag is None else f"{tag} {cell.label()}"
        log(progress_line(result, f"{done} run {repeat}/{self.repeat}"))

    def cell_finished(self, cell: CellKey, result: CellResult) -> None:
        tag = self.tag(result)
        if tag is not None:
            log(progress_line(result, tag))
            return
        done = self.in_matrix()
        self.finished += 1
        log(progress_line(result, done + (" (mean)" if self.repeat > 1 else "")))
