"""Terminal rendering of cells (pure: dicts in, text out). Times in ms, rates in tok/s."""

from __future__ import annotations

COLUMNS = [
    ("ctx", 6), ("conc", 5), ("ok/fail", 9), ("out tok/s", 10), ("req tok/s", 10), ("p10", 7),
    ("TTFT ms", 8), ("p50", 8), ("p99", 8), ("pp tok/s", 9), ("E2E s", 7), ("tok/chk", 7),
    ("accept", 14), ("W", 7), ("J/tok", 7), ("note", 0),
]


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def header() -> str:
    return " ".join(name.rjust(w) if w else name for name, w in COLUMNS)


def row(cell: dict) -> str:
    req = cell.get("requests") or {}
    acc = cell.get("accept_length") or {}
    power = cell.get("power") or {}
    load = f"{cell['request_rate']:g}/s" if cell.get("request_rate") is not None else str(cell["concurrency"])
    if cell.get("ramp"):  # open-loop ramp: the key holds R1; show the whole ramp
        load = f"{cell['ramp']['r0']:g}→{cell['ramp']['r1']:g}/s"
    accept = "-" if acc.get("value") is None else f"{acc['value']:.2f} {acc.get('source', '')}"
    notes = []
    if cell.get("status", "ok") != "ok":
        notes.append(f"{cell['status'].upper()}: {cell.get('error') or ''}")
    if acc.get("disagreement"):
        notes.append("sources disagree: " + acc["disagreement"])
    if (cell.get("client") or {}).get("saturated"):
        notes.append("CLIENT SATURATED (" + "; ".join(cell["client"].get("reasons", [])) + ") add --workers")
    for w in cell.get("warnings", []):
        notes.append(w)
    ttft = cell.get("ttft_s") or {}
    rts = cell.get("request_tok_s") or {}
    values = [
        str(cell["context_tokens"]), load, f"{req.get('ok', 0)}/{req.get('failed', 0)}",
        _f(cell.get("output_tok_s"), ".1f"), _f(rts.get("mean"), ".1f"), _f(rts.get("p10"), ".1f"),
        _ms(ttft.get("mean")), _ms(ttft.get("p50")), _ms(ttft.get("p99")), _f(cell.get("prefill_tok_s"), ".0f"),
        _f((cell.get("e2e_s") or {}).get("mean"), ".2f"), _f(cell.get("tokens_per_chunk_mean"), ".2f"), accept,
        _f(power.get("mean_w_total"), ".0f"), _f(power.get("j_per_output_token"), ".3f"), " | ".join(notes),
    ]
    return " ".join(v.rjust(w) if w else v for v, (_, w) in zip(values, COLUMNS))


def table(cells: list[dict]) -> str:
    return "\n".join([header()] + [row(c) for c in cells])
