"""The matrix table of cells (pure: typed cells in, text out). Times in ms, rates in tok/s.

Two tables from one list of columns: the wide one (`--wide`) shows every column; the default one shows the
columns named in `DEFAULT` and fits `WIDTH` characters (or a narrower terminal): when its columns are wider,
the column of lowest priority goes first, until they fit. A column another part adds joins the wide table by
being in `COLUMNS`, and the default one by a name in `DEFAULT`. The default table numbers each cell's note
(`n1`) and prints the notes under the rows, one note naming every row that carries it, so a long note never
widens it.

The default table's columns depend on the kind of run only (the candidates: `columns`, with `verify` and `SLO`
when the run has them), chosen from the columns' declared widths; a cell that lacks a figure shows "-". Only a
row whose texts overflow their widths drops more.

Every header names its figure and its statistic (`req tok/s mean`, `TTFT p99`); a percentile computed from
fewer than FEW_SAMPLES samples is marked `*` (a p99 of 16 requests is their maximum; `samples`); `±95%` is the
half-width of the confidence interval of `out tok/s` (`intervals`). docs/definitions.md defines each column."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loadgen.console import WIDTH, wrap_lines
from loadgen.metrics.client_health import saturation_note
from loadgen.names import CellStatus
from loadgen.report import gpu_columns
from loadgen.report import text_table as tt
from loadgen.report.text_table import Column, millis, number
from loadgen.results.cell_result import CellResult
from loadgen.results.correctness import verify_text
from loadgen.results.incidents import IncidentKind
from loadgen.results.slo_part import attainment_text

FEW_SAMPLES = 100


def _load(cell: CellResult) -> str:
    """Closed loop: the concurrency; open loop: the rate; a ramp: R0→R1 (its key holds R1)."""
    ramp, key = cell.load.ramp, cell.key
    if ramp:
        return f"{ramp['r0']:g}→{ramp['r1']:g}/s"
    return f"{key.request_rate:g}/s" if key.request_rate is not None else str(key.concurrency)


def _accept(cell: CellResult) -> str:
    acc = cell.accept.accept_length or {}
    return tt.MISSING if acc.get("value") is None else f"{acc['value']:.2f}"


def notes(cell: CellResult) -> str:
    """The cell's notes in one line: not ok, sources that disagree, a saturated client, the warnings."""
    acc = cell.accept.accept_length or {}
    found = []
    if cell.status != CellStatus.OK:
        found.append(f"{cell.status.upper()}: {cell.error or ''}")
    if acc.get("disagreement"):
        found.append("sources disagree: " + acc["disagreement"])
    client = cell.telemetry.client or {}
    saturated = saturation_note(client, cell.key.as_dict()) if client.get("saturated") else None
    warnings = cell.notes  # as the file's `warnings`: the incidents' notes, then the other warnings
    if saturated and not cell.has(IncidentKind.CLIENT_SATURATED):  # its note is among the notes already
        found.append(saturated)
    return " | ".join(found + warnings)


def samples(cell: CellResult, path: str) -> int | None:
    """How many values the figure at `path` ("ttft_s.p50") was computed from: its distribution's `samples`, or,
    for a mean over the runs of --repeat (a key figure), every run's samples added (`repeats.samples`; a file
    without them: the last run's × n). A figure not averaged over the runs is the last run's, with its samples."""
    own: int | None = tt.field(cell, path.split(".")[0] + ".samples")
    runs = cell.noise.repeats or {}
    if path not in (runs.get("values") or {}):
        return own
    each: list[int] | None = (runs.get("samples") or {}).get(path)
    if each:
        return sum(each)
    return None if own is None else own * int(runs.get("n") or 1)


def _few_samples(cell: CellResult, path: str) -> bool:
    """The figure at `path` was computed from some, but fewer than FEW_SAMPLES, samples (`samples`)."""
    n = samples(cell, path)
    return n is not None and 0 < n < FEW_SAMPLES


def _percentile(path: str, ms: bool = False) -> Callable[[CellResult], str]:
    """The percentile at `path` ("ttft_s.p99"), in ms when `ms`, marked "*" when it was computed from fewer
    than FEW_SAMPLES samples."""
    text = millis(path) if ms else number(path, ".1f")

    def show(cell: CellResult) -> str:
        shown = text(cell)
        return shown + "*" if shown != tt.MISSING and _few_samples(cell, path) else shown
    return show


def half_width(path: str, scale: float = 1.0) -> Callable[[CellResult], str]:
    """"±12.3": half the width of the confidence interval of the figure at `path` (`intervals`), times
    `scale` (1e3: seconds shown in ms), or "-"."""
    def show(cell: CellResult) -> str:
        interval = (cell.noise.intervals or {}).get(path)
        return tt.MISSING if not interval else f"±{(interval[1] - interval[0]) / 2 * scale:.1f}"
    return show


def _repeats(cell: CellResult) -> str:
    return str((cell.noise.repeats or {}).get("n") or 1)


def _slo(cell: CellResult) -> str:
    return attainment_text(cell.slo) or tt.MISSING


def goodput_columns() -> list[Column]:
    """The SLO's wide columns (the default table shows `SLO` only): goodput in requests/s and good tok/s."""
    return [Column("good req/s", 10, number("slo.goodput_requests_s", ".2f")),
            Column("good tok/s", 10, number("slo.good_output_tok_s", ".1f"))]


COLUMNS = [
    tt.CONTEXT,
    Column("conc", 5, _load),
    Column("ok/fail", 9, tt.ok_failed),
    Column("runs", 4, _repeats),
    Column("out tok/s", 10, number("output_tok_s", ".1f")),
    Column("±95%", 7, half_width("output_tok_s")),
    Column("steady tok/s", 12, number("steady.output_tok_s", ".1f")),
    Column("req tok/s mean", 14, number("request_tok_s.mean", ".1f")),
    Column("±req", 7, half_width("request_tok_s.mean")),
    Column("req p10", 8, _percentile("request_tok_s.p10")),
    Column("TTFT mean ms", 12, millis("ttft_s.mean")),
    Column("TTFT p50 ms", 11, _percentile("ttft_s.p50", ms=True)),
    Column("±p50", 7, half_width("ttft_s.p50", 1e3)),
    Column("TTFT p99 ms", 11, _percentile("ttft_s.p99", ms=True)),
    Column("pp tok/s", 9, number("prefill_tok_s", ".0f")),
    Column("E2E s", 6, number("e2e_s.mean", ".2f")),
    Column("tok/chk", 7, number("tokens_per_chunk_mean", ".2f")),
    Column("accept", 6, _accept),
    Column("source", -11, lambda c: (c.accept.accept_length or {}).get("source") or tt.MISSING),
    Column("ms/step", 7, millis("steps.step_itl_s.mean")),  # a verify step as a request sees it (verify_steps)
    Column("W", 6, number("power.mean_w_total", ".0f")),
    Column("J/tok", 7, number("power.j_per_output_token", ".3f")),
    gpu_columns.DEFAULT_COLUMN,
    *gpu_columns.WIDE_COLUMNS,
    Column("note", 0, notes),
]

# the default table's columns → priority: when the rows are wider than the limit, the lowest goes first
DEFAULT = {"ctx": 100, "conc": 100, "ok/fail": 90, "out tok/s": 100, "±95%": 80, "req tok/s mean": 85,
           "TTFT p50 ms": 85, "TTFT p99 ms": 70, "E2E s": 60, "accept": 75, "J/tok": 62, "GPU%": 65, "verify": 95,
           "SLO": 95, "good tok/s": 94, "note": 100}
NOTE_REF = Column("note", 0, lambda ref: ref)  # the default table's note column: the number of the cell's note


VERIFY = Column("verify", 10, verify_text)  # --verify: before the note (results/correctness.verify_text)


SLO = Column("SLO", 8, _slo)  # --slo: attainment and met, before the note


def columns(cells: Sequence[CellResult]) -> list[Column]:
    """The matrix's columns for these cells: before the note, the verify column when a cell was verified
    (--verify), the SLO's when a cell had latency targets (--slo)."""
    extra = [VERIFY] if verified(cells) else []
    if any(c.slo for c in cells):
        extra += [SLO, *goodput_columns()]
    return [*COLUMNS[:-1], *extra, COLUMNS[-1]]


def verified(cells: Sequence[CellResult]) -> bool:
    return any(c.correctness for c in cells)


def title(label: str | None, run_id: str) -> str:
    """The line above the matrix: which run (and its label) the rows belong to."""
    return f"run {run_id}" + (f"  label {label}" if label else "")


def header(columns: list[Column] = COLUMNS) -> str:
    return tt.header(columns)


def row(cell: CellResult, columns: list[Column] = COLUMNS) -> str:
    return tt.line(columns, cell)


CANCELLED_LEGEND = "+Nc in ok/fail: N requests cancelled by the client (an interrupt), neither ok nor failed"
ABANDONED_LEGEND = "+Na in ok/fail: N requests closed on purpose (--cancel-fraction), neither ok nor failed"


def footnote(cells: Sequence[CellResult]) -> str | None:
    """The legends of "*", "+Nc", "+Na", "±95%" and GPU%'s names, for the marks the rows carry, one a line."""
    legends = []
    if any(_few_samples(c, path) for c in cells for path in PERCENTILES):
        legends.append(few_samples_legend(any(c.noise.repeats for c in cells)))
    if any(c.requests.requests.get("cancelled") for c in cells):
        legends.append(CANCELLED_LEGEND)
    if any(c.requests.requests.get("abandoned") for c in cells):
        legends.append(ABANDONED_LEGEND)
    if any(c.noise.intervals for c in cells):
        legends.append("±95%: half-width of the 95 % confidence interval of out tok/s (over the requests, or "
                       "over the runs of --repeat)")
    gpu = gpu_columns.legend(cells)
    return "\n".join(legends + ([gpu] if gpu else [])) or None


PERCENTILES = ("request_tok_s.p10", "ttft_s.p50", "ttft_s.p99")  # the figures `*` may mark


def few_samples_legend(repeated: bool) -> str:
    """The legend of `*`: exactly what it counts, and under --repeat which figures pool the runs."""
    text = (f"* percentile computed from fewer than {FEW_SAMPLES} samples (requests with that figure): a p99 of "
            f"fewer than {FEW_SAMPLES} is close to their maximum; raise --requests-per-cell for a tail figure")
    if repeated:
        text += ("; with --repeat, TTFT p50 is the mean over the runs and counts every run's samples, TTFT p99 "
                 "and req p10 are the last run's and count its own")
    return text


def note_refs(cells: Sequence[CellResult]) -> tuple[list[str], list[str]]:
    """Each cell's note reference and the notes as lines "n1 ctx 1024 conc 128, ctx 60 conc 1: …" (`note_refs`)."""
    return tt.note_refs(cells, notes, row_label)


def row_label(cell: CellResult) -> str:
    """"ctx 1024 conc 128", and "#2" for the same load measured again (a search's probe, the drift control)."""
    again = f" #{cell.key.again + 1}" if cell.key.again else ""
    return f"ctx {tt.context(cell)} conc {_load(cell)}{again}"


def _drop_until(columns: list[Column], priorities: dict[str, int],
                fits: Callable[[list[Column]], bool]) -> list[Column]:
    """`columns` less the lowest priority (the rightmost of a tie) first, until `fits(columns)`."""
    columns = list(columns)
    while len(columns) > 1 and not fits(columns):
        columns.remove(min(columns, key=lambda c: (priorities[c.header], -columns.index(c))))
    return columns


def declared_width(columns: list[Column]) -> int:
    """The width of a row of `columns` whose texts fit their widths, with the note column (`n99`) after it."""
    return sum(max(abs(c.width), len(c.header)) + 1 for c in columns) + len("note")


def default_columns(cells: Sequence[CellResult], width: int = WIDTH, candidates: list[Column] = COLUMNS,
                    priorities: dict[str, int] = DEFAULT) -> list[Column]:
    """The default table's columns that fit `width`: the `candidates` named in `priorities`, the lowest
    priority left out first while their declared widths are wider (the same columns for every run of a kind),
    then only while a row whose texts overflow (its note reference included) is still wider."""
    columns = [c for c in candidates if c.header in priorities and c.header != "note"]
    refs, _ = note_refs(cells)
    ref_width = max([len("note"), *(len(r) for r in refs)])

    def rows_fit(cols: list[Column]) -> bool:
        lines = [tt.header(cols), *(tt.line(cols, c) for c in cells)]
        return max(len(line) for line in lines) + 1 + ref_width <= width
    fixed = _drop_until(columns, priorities, lambda cols: declared_width(cols) <= width)
    return _drop_until(fixed, priorities, rows_fit)


def table(cells: Sequence[CellResult], heading: str | None = None, wide: bool = False, width: int = WIDTH,
          candidates: list[Column] | None = None, priorities: dict[str, int] = DEFAULT) -> str:
    """The matrix: `heading` (e.g. `title(...)`), the header, one row per cell, the legend of "*". Wide:
    every column, each note in its row; else the default columns fitted to `width` (`default_columns`), the
    notes below. The candidates default to the matrix's columns (`columns`: the verify column when a cell
    was verified)."""
    candidates = candidates if candidates is not None else columns(cells)
    if wide:
        lines = [header(candidates), *(row(c, candidates) for c in cells)]
        notes_below: list[str] = []
    else:
        shown = default_columns(cells, width, candidates, priorities)
        refs, notes_below = note_refs(cells)
        lines = [tt.header([*shown, NOTE_REF])]
        lines += [tt.join([*shown, NOTE_REF], [*tt.texts(shown, c), ref]) for c, ref in zip(cells, refs)]
    lines = [line.rstrip() for line in ([heading] if heading else []) + lines]
    wrapped = [w for n in notes_below for w in wrap_lines(n, width)]
    legend = (footnote(cells) or "").splitlines()
    legends = [w for line in legend for w in wrap_lines(line, width, "  ")]
    return "\n".join(lines + wrapped + legends)


def progress_line(cell: CellResult, done: str) -> str:
    """The one line said on stderr when a cell (or one repeat of it) is measured: `done` ("cell 3/6"), the
    cell's headline figures and what its notes are about ("CLIENT SATURATED"; the notes are under the final
    table); `console.log` wraps it within WIDTH."""
    out = tt.field(cell, "output_tok_s")
    interval = (cell.noise.intervals or {}).get("output_tok_s")
    spread = f" {half_width('output_tok_s')(cell)}" if interval else ""
    ttft = tt.field(cell, "ttft_s.p50")
    head = (f"{done} ctx {tt.context(cell)} conc {_load(cell)}: {tt.ok_failed(cell)} ok/fail, "
            f"{tt.fmt(out, '.1f')}{spread} tok/s, TTFT p50 {tt.fmt_ms(ttft)} ms")
    labels = [part.split(" (")[0].split(":")[0] for part in notes(cell).split(" | ") if part]
    return head if not labels else f"{head} | {', '.join(labels)}"
