"""The open-loop table: latency from the actual send and from the intended send, rates and lateness."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.console import wrap_lines
from loadgen.metrics.open_loop import MIN_WINDOW_REQUESTS
from loadgen.names import CellStatus
from loadgen.report import text_table as tt
from loadgen.report.text_table import Column, millis, number
from loadgen.results.cell_result import CellResult


def _load(cell: CellResult) -> str:
    ramp = cell.load.ramp
    return f"{ramp['r0']:g}→{ramp['r1']:g}" if ramp else f"{cell.key.request_rate:g}"


def _notes(cell: CellResult) -> str:
    client = cell.telemetry.client or {}
    notes = []
    if client.get("saturated"):
        notes.append("CLIENT-BOUND: " + "; ".join(client.get("reasons", [])))
    if cell.status != CellStatus.OK:
        notes.append(f"{cell.status.upper()}: {cell.error or ''}")
    return " | ".join(notes)


COLUMNS = [
    tt.CONTEXT,
    Column("rate/s", 11, _load),
    Column("cap", 4, lambda c: str(c.key.concurrency or "-")),
    Column("sched/s", 8, number("schedule_request_rate", ".2f")),
    Column("achvd/s", 8, number("achieved_request_rate", ".2f")),
    Column("ok/fail", 9, tt.ok_failed),
    Column("TTFT50 snd", 10, millis("ttft_s.p50")),
    Column("int", 8, millis("ttft_from_intended_s.p50")),
    Column("TTFT99 snd", 10, millis("ttft_s.p99")),
    Column("int", 8, millis("ttft_from_intended_s.p99")),
    Column("E2E50 snd", 9, number("e2e_s.p50", ".3f")),
    Column("int", 7, number("e2e_from_intended_s.p50", ".3f")),
    Column("E2E99 snd", 9, number("e2e_s.p99", ".3f")),
    Column("int", 7, number("e2e_from_intended_s.p99", ".3f")),
    Column("late50", 7, millis("send_lateness_s.p50")),
    Column("late99", 7, millis("send_lateness_s.p99")),
    Column("lateMax", 8, millis("send_lateness_s.max")),
    Column("note", 0, _notes),
]


# the default table (within 120 characters): the 50th percentiles of E2E, lateness p50 and max, and the
# scheduled rate are left to --wide
DEFAULT = [c for i, c in enumerate(COLUMNS) if i not in (3, 10, 11, 14, 16)]


def render_row(cell: CellResult, columns: list[Column] = COLUMNS) -> str:
    return tt.line(columns, cell)


def ramp_line(cell: CellResult) -> str:
    """The one number people ask for, with how it was found."""
    r = cell.load.ramp or {}
    head = (f"ramp ctx={cell.key.context_tokens} {r['r0']:g}→{r['r1']:g} req/s over {r['duration_s']:g} s, "
            f"SLO TTFT p99 ≤ {r['slo_ttft_s'] * 1e3:g} ms "
            f"(from intended send, {r['window_s']:g} s windows): ")
    if r["windows_judged"] == 0:
        return head + f"no window held {MIN_WINDOW_REQUESTS} requests; lengthen --ramp-window or the ramp"
    if r["held"]:
        return head + (f"never crossed; sustainable request rate ≥ {r['sustainable_request_rate']:.2f} req/s "
                       f"(raise R1)")
    at_cross = r["ttft_p99_at_cross_s"]
    p99 = "a failed request" if at_cross is None else f"{at_cross * 1e3:.0f} ms"
    if r["sustainable_request_rate"] is None:
        return head + f"crossed in the first window ({p99} at {r['rate_at_cross']:.2f} req/s); lower R0"
    return head + (f"sustainable request rate {r['sustainable_request_rate']:.2f} req/s "
                   f"(crossed at t={r['crossed_at_s']:.2f} s, {r['rate_at_cross']:.2f} req/s: p99 {p99})")


NOTE_REF = Column("note", 0, lambda ref: ref)  # the default table's note column: the number of the row's note


def _default_rows(rows: list[CellResult]) -> list[str]:
    """The default columns with each row's note numbered, the notes below (`text_table.note_refs`)."""
    shown = DEFAULT[:-1]
    refs, notes = tt.note_refs(rows, _notes, lambda c: f"ctx {tt.context(c)} rate {_load(c)}/s")
    lines = [tt.header([*shown, NOTE_REF])]
    lines += [tt.join([*shown, NOTE_REF], [*tt.texts(shown, c), ref]).rstrip() for c, ref in zip(rows, refs)]
    return lines + [w for note in notes for w in wrap_lines(note)]


def render(cells: Sequence[CellResult], wide: bool = False) -> str:
    """The open-loop table: latency from the actual send (snd, uncorrected) and from the intended send (int,
    corrected for client queueing), achieved vs scheduled rate, and lateness; then one line per ramp. Wide:
    every column, each note in its row; else `DEFAULT`, the notes numbered below."""
    rows = [c for c in cells if c.key.request_rate is not None]
    if not rows:
        return ""
    lines = ["open loop — snd: from the actual send (uncorrected); int: from the intended send (corrected).",
             "TTFT and lateness in ms, E2E in s"]
    lines += [tt.header(COLUMNS), *(render_row(c) for c in rows)] if wide else _default_rows(rows)
    lines += [w for c in rows if c.load.ramp for w in wrap_lines(ramp_line(c))]
    return "\n".join(lines)
