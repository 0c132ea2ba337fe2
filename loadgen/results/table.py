"""The matrix table of cells (pure: dicts in, text out). Times in ms, rates in tok/s."""

from __future__ import annotations

from loadgen.results import text_table as tt
from loadgen.results.text_table import Column, millis, number


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
    if cell.get("status", "ok") != "ok":
        notes.append(f"{cell['status'].upper()}: {cell.get('error') or ''}")
    if acc.get("disagreement"):
        notes.append("sources disagree: " + acc["disagreement"])
    if (cell.get("client") or {}).get("saturated"):
        notes.append("CLIENT SATURATED (" + "; ".join(cell["client"].get("reasons", [])) + ") add --workers")
    notes += cell.get("warnings", [])
    return " | ".join(notes)


COLUMNS = [
    Column("ctx", 6, lambda c: str(c["context_tokens"])),
    Column("conc", 5, _load),
    Column("ok/fail", 9, tt.ok_failed),
    Column("out tok/s", 10, number("output_tok_s", ".1f")),
    Column("req tok/s", 10, number("request_tok_s.mean", ".1f")),
    Column("p10", 7, number("request_tok_s.p10", ".1f")),
    Column("TTFT ms", 8, millis("ttft_s.mean")),
    Column("p50", 8, millis("ttft_s.p50")),
    Column("p99", 8, millis("ttft_s.p99")),
    Column("pp tok/s", 9, number("prefill_tok_s", ".0f")),
    Column("E2E s", 7, number("e2e_s.mean", ".2f")),
    Column("tok/chk", 7, number("tokens_per_chunk_mean", ".2f")),
    Column("accept", 14, _accept),
    Column("W", 7, number("power.mean_w_total", ".0f")),
    Column("J/tok", 7, number("power.j_per_output_token", ".3f")),
    Column("note", 0, _notes),
]


def header() -> str:
    return tt.header(COLUMNS)


def row(cell: dict) -> str:
    return tt.line(COLUMNS, cell)


def table(cells: list[dict]) -> str:
    return "\n".join([header()] + [row(c) for c in cells])
