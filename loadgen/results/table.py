"""The matrix table of cells (pure: dicts in, text out). Times in ms, rates in tok/s.

Every header names its figure and its statistic (`req tok/s mean`, `req p10`, `TTFT p99`); `n` is the number
of requests the per-request figures are over, and a percentile over fewer than FEW_SAMPLES of them is marked
`*` (a p99 of 16 requests is their maximum). docs/definitions.md defines each column."""

from __future__ import annotations

from loadgen.names import CellStatus
from loadgen.results import gpu_columns
from loadgen.results import text_table as tt
from loadgen.results.cell_result import saturation_note
from loadgen.results.text_table import Column, field, millis, number

FEW_SAMPLES = 100


def _load(cell: dict) -> str:
    """Closed loop: the concurrency; open loop: the rate; a ramp: R0→R1 (its key holds R1)."""
    if cell.get("ramp"):
        return f"{cell['ramp']['r0']:g}→{cell['ramp']['r1']:g}/s"
    return f"{cell['request_rate']:g}/s" if cell.get("request_rate") is not None else str(cell["concurrency"])


def _accept(cell: dict) -> str:
    acc = cell.get("accept_length") or {}
    return tt.MISSING if acc.get("value") is None else f"{acc['value']:.2f} {acc.get('source', '')}"


def _notes(cell: dict) -> str:
    acc = cell.get("accept_length") or {}
    notes = []
    if cell.get("status", CellStatus.OK) != CellStatus.OK:
        notes.append(f"{cell['status'].upper()}: {cell.get('error') or ''}")
    if acc.get("disagreement"):
        notes.append("sources disagree: " + acc["disagreement"])
    saturated = saturation_note(cell["client"]) if (cell.get("client") or {}).get("saturated") else None
    if saturated and saturated not in cell.get("warnings", []):  # a file of an earlier loadgen
        notes.append(saturated)
    notes += cell.get("warnings", [])
    return " | ".join(notes)


def _few_samples(cell: dict, figure: str) -> bool:
    """The distribution `figure` ("ttft_s") holds some, but fewer than FEW_SAMPLES, samples."""
    samples = field(cell, figure + ".samples")
    return samples is not None and 0 < samples < FEW_SAMPLES


def _percentile(path: str, ms: bool = False):
    """The percentile at `path` ("ttft_s.p99"), in ms when `ms`, marked "*" when its distribution holds
    fewer than FEW_SAMPLES samples."""
    figure = path.split(".")[0]
    text = millis(path) if ms else number(path, ".1f")

    def show(cell: dict) -> str:
        shown = text(cell)
        return shown + "*" if shown != tt.MISSING and _few_samples(cell, figure) else shown
    return show


COLUMNS = [
    tt.CONTEXT,
    Column("conc", 5, _load),
    Column("ok/fail", 9, tt.ok_failed),
    Column("out tok/s", 10, number("output_tok_s", ".1f")),
    Column("steady tok/s", 12, number("steady.output_tok_s", ".1f")),
    Column("req tok/s mean", 14, number("request_tok_s.mean", ".1f")),
    Column("req p10", 8, _percentile("request_tok_s.p10")),
    Column("TTFT mean ms", 12, millis("ttft_s.mean")),
    Column("TTFT p50", 9, _percentile("ttft_s.p50", ms=True)),
    Column("TTFT p99", 9, _percentile("ttft_s.p99", ms=True)),
    Column("n", 5, number("ttft_s.samples", "d")),
    Column("pp ms", 8, millis("prefill_s")),
    Column("pp tok/s", 9, number("prefill_tok_s", ".0f")),
    Column("E2E s", 7, number("e2e_s.mean", ".2f")),
    Column("tok/chk", 7, number("tokens_per_chunk_mean", ".2f")),
    Column("accept", 14, _accept),
    Column("W", 7, number("power.mean_w_total", ".0f")),
    Column("J/tok", 7, number("power.j_per_output_token", ".3f")),
    gpu_columns.DEFAULT_COLUMN,
    *gpu_columns.WIDE_COLUMNS,
    Column("note", 0, _notes),
]


def title(label: str | None, run_id: str) -> str:
    """The line above the matrix: which run (and its label) the rows belong to."""
    return f"run {run_id}" + (f"  label {label}" if label else "")


def header() -> str:
    return tt.header(COLUMNS)


def row(cell: dict) -> str:
    return tt.line(COLUMNS, cell)


CANCELLED_LEGEND = "+Nc in ok/fail: N requests cancelled by the client (an interrupt), neither ok nor failed"


def footnote(cells: list[dict]) -> str | None:
    """The legend of "*" and of "+Nc", when a row carries one."""
    notes = []
    if any(_few_samples(c, f) for c in cells for f in ("request_tok_s", "ttft_s")):
        notes.append(f"* percentile over fewer than {FEW_SAMPLES} requests (n): a p99 of n < {FEW_SAMPLES} is "
                     f"close to their maximum; raise --requests-per-cell for a tail figure")
    if any((c.get("requests") or {}).get("cancelled") for c in cells):
        notes.append(CANCELLED_LEGEND)
    return "\n".join(notes) or None


def table(cells: list[dict], heading: str | None = None) -> str:
    """The matrix: `heading` (e.g. `title(...)`), the header, one row per cell, the legend of "*"."""
    lines = ([heading] if heading else []) + [header()] + [row(c) for c in cells]
    note = footnote(cells)
    return "\n".join(lines + ([note] if note else []))
