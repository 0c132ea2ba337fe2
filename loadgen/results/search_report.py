"""What `loadgen search` says: per prompt length, the answer and the two cells that bracket it (pure)."""

from __future__ import annotations

from loadgen.config import SloConfig
from loadgen.names import SearchOver
from loadgen.record import CellKey, cell_key
from loadgen.results.incidents import IncidentKind
from loadgen.results.search import Bracket, SearchConfig, probe_key, replay, resolution_text


def targets_text(slo: SloConfig) -> str:
    """'ttft ≤ 300 ms, tpot ≤ 25 ms; ≥ 90% of requests'."""
    shown = ", ".join(f"{m} ≤ {t * 1e3:g} ms" for m, t in slo.slo_targets.items())
    return f"{shown}; ≥ {slo.slo_attainment:.0%} of requests"


def _load(cfg: SearchConfig, x: float) -> str:
    return f"c={x:g}" if cfg.over == SearchOver.CONCURRENCY else f"rate={x:g}/s"


def cell_line(verdict: str, cfg: SearchConfig, x: float, cell: dict | None) -> str:
    """'  met    c=13      93% good (30 of 32)  goodput 40.1 req/s, 2567.0 good tok/s of 2740.2 tok/s'."""
    if cell is None:
        return f"  {verdict:<6} {_load(cfg, x):<12} not measured"
    slo = cell.get("slo") or {}
    line = (f"  {verdict:<6} {_load(cfg, x):<12} {slo.get('attainment') or 0:4.0%} good ({slo.get('good')} of "
            f"{slo.get('scheduled')})  goodput {slo.get('goodput_requests_s') or 0:.2f} req/s, "
            f"{slo.get('good_output_tok_s') or 0:.1f} good tok/s of {cell.get('output_tok_s') or 0:.1f} tok/s")
    early = [i["reason"] for i in cell.get("incidents", []) if i["kind"] == IncidentKind.OVERSATURATED]
    return line + (f"\n         {early[0]}" if early else "")


def answer_lines(cfg: SearchConfig, context: int, b: Bracket, cells: dict[CellKey, dict], cap: int) -> list[str]:
    what = "concurrency" if cfg.over == SearchOver.CONCURRENCY else "request rate"
    head = f"ctx={context}: highest {what} that meets the SLO: "
    head += f"{b.met:g}" if b.met is not None else "none"
    lines = [f"{head}  ({len(b.probes)} cells; {b.ended})"]
    if b.met is not None:
        lines.append(cell_line("met", cfg, b.met, cells.get(probe_key(cfg, context, b.met, cap))))
    if b.missed is not None:
        lines.append(cell_line("missed", cfg, b.missed, cells.get(probe_key(cfg, context, b.missed, cap))))
    return lines


def search_text(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: list[dict], cap: int = 0) -> str:
    """The whole answer, replayed from the cells (`search.replay`), one block per prompt length."""
    by_key = {cell_key(c): c for c in cells}
    lines = [f"search over {cfg.over}: SLO {targets_text(slo)}; resolution {resolution_text(cfg)}"]
    for ctx in contexts:
        lines += answer_lines(cfg, ctx, replay(cfg, ctx, by_key, cap), by_key, cap)
    return "\n".join(lines)


def search_section(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: list[dict], cap: int = 0) -> dict:
    """The results document's `search` part: the settings and, per prompt length, the bracket found."""
    by_key = {cell_key(c): c for c in cells}
    answers = {}
    for ctx in contexts:
        b = replay(cfg, ctx, by_key, cap)
        answers[str(ctx)] = {"met": b.met, "missed": b.missed, "probes": b.probes, "ended": b.ended,
                             "complete": b.complete}
    return {"over": cfg.over, "start": cfg.start, "growth": cfg.growth, "limit": cfg.limit,
            "resolution": cfg.resolution, "relative": cfg.relative, "max_cells": cfg.max_cells,
            "slo_targets": slo.slo_targets, "slo_attainment": slo.slo_attainment, "answers": answers}


def search_complete(doc: dict | None, contexts: list[int]) -> bool:
    """The results document's search found its answer for every prompt length (a resumed sweep skips it)."""
    answers = ((doc or {}).get("search") or {}).get("answers") or {}
    return all((answers.get(str(ctx)) or {}).get("complete") for ctx in contexts)


def capacity_ranking(runs: list) -> str | None:
    """'configurations by capacity found (highest concurrency that meets the SLO):' then one line per
    configuration and prompt length, best first; None when no configuration was searched. `runs` are
    `compare.Run`s (name, doc)."""
    found = [(r.name, ctx, a, r.doc["search"]) for r in runs if (r.doc.get("search") or {}).get("answers")
             for ctx, a in r.doc["search"]["answers"].items()]
    if not found:
        return None
    over = found[0][3]["over"]
    what = "concurrency" if over == SearchOver.CONCURRENCY else "request rate"
    lines = [f"configurations by capacity found (highest {what} that meets the SLO):"]
    ranked = sorted(found, key=lambda f: (int(f[1]), -(f[2]["met"] if f[2]["met"] is not None else -1)))
    for name, ctx, a, _ in ranked:
        shown = "none met" if a["met"] is None else f"{a['met']:g}"
        bracket = f" (missed at {a['missed']:g})" if a.get("missed") is not None else ""
        lines.append(f"  ctx={ctx:<6} {name:<24} {shown:>8}{bracket}  {len(a['probes'])} cells; {a['ended']}")
    return "\n".join(lines)
