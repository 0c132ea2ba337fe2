"""A tune's answer in words (pure: the verdicts and `tune.json` in, lines out): the verdict at each wanted load
(`verdict_text`), the configurations that could not serve with the end of their diagnostics, the ties still
open, and the cost beside the full grid's."""

from __future__ import annotations

import textwrap
from typing import Any

from loadgen.report.verdict_text import verdict_lines
from loadgen.results.verdict import Verdict

DIAGNOSTIC_LINES = 5


def cost_lines(doc: dict[str, Any]) -> list[str]:
    """'cost: 9 restarts, 23 cells, 412 measured requests, 1.9 GPU-minutes' and the full grid's beside it."""
    g = doc["grid"]
    est = g.get("gpu_minutes_estimate")
    share = f"; this tune measured {doc['requests_measured'] / g['requests']:.0%} of its requests" if g["requests"] \
        else ""
    return [f"cost: {doc['restarts']} restarts, {doc['cells_measured']} cells, {doc['requests_measured']:,} measured "
            f"requests, {doc['gpu_minutes']:.1f} GPU-minutes (restarts, readiness waits and cells)",
            f"the full grid at the same requests per cell: {g['restarts']} restarts, {g['cells']} cells, "
            f"{g['requests']:,} requests" + (f", about {est:.1f} GPU-minutes" if est is not None else "") + share]


def infeasible_lines(doc: dict[str, Any]) -> list[str]:
    out = []
    for item in doc["infeasible"]:
        out.append("  " + item["sentence"])
        tail = [ln for ln in (item.get("diagnostics_tail") or "").splitlines() if ln.strip() and not ln.startswith("====")]
        out += [f"    | {ln}" for ln in tail[-DIAGNOSTIC_LINES:]]
    return ["infeasible (never ranked, at any load):", *out] if out else []


def open_lines(doc: dict[str, Any]) -> list[str]:
    """The ties the tune could not settle at its resolution: what more measuring would be for."""
    out = []
    for a in doc["answers"]:
        if a["contenders"]:
            load = f"rate {a['rate']:g}/s" if a["rate"] is not None else f"c={a['concurrency']}"
            out.append(f"still open at ctx={a['context']} {load}: {', '.join(a['contenders'])} are within noise of "
                       f"each other but not proven within ±{doc['resolution']:.0%}; more [tune] rounds or a larger "
                       "requests_per_cell would settle it")
        elif a.get("beyond_reach"):
            load = f"rate {a['rate']:g}/s" if a["rate"] is not None else f"c={a['concurrency']}"
            out.append(f"tied within noise at ctx={a['context']} {load}: {', '.join(a['beyond_reach'])}; one more "
                       "round of parts could not separate them nor settle the tie, so none was measured (the noise "
                       f"between runs is wider than ±{doc['resolution']:.0%}: a quieter server or more requests per "
                       "part would)")
    return out


def tune_lines(verdicts: list[Verdict], doc: dict[str, Any], width: int = 120) -> list[str]:
    head = f"tune {doc['name']}: {doc['objective']} at each load, resolution {doc['resolution']:.0%}"
    if doc.get("stopped"):
        head += f"; stopped early: {doc['stopped']}"
    elif not doc.get("complete"):
        head += "; not finished: run the same command to go on"
    out = textwrap.wrap(head, width)
    out += verdict_lines(verdicts, width)
    for block in (infeasible_lines(doc), open_lines(doc), cost_lines(doc)):
        for line in block:
            indent = " " * (len(line) - len(line.lstrip()))
            out += textwrap.wrap(line, width, subsequent_indent=indent + "    ") or [line]
    return out
