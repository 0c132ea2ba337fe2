"""What `loadgen search` says: per prompt length, the answer, what it rests on that a reader must know (its
caveats: `results/search_caveats.py`), the two probes that bracket it, the loads measured again and the control
probe's verdict (pure; every line within 120 columns)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from loadgen.config import SloConfig
from loadgen.names import SearchOver
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.compare_inputs import Run
from loadgen.results.incidents import IncidentKind
from loadgen.results.search import Probe, SearchConfig, resolution_text
from loadgen.results.search_caveats import caveats
from loadgen.results.search_walk import Again, Bracket, replay

WIDTH = 120
INDENT = " " * 9


def targets_text(slo: SloConfig) -> str:
    """'ttft ≤ 300 ms, tpot ≤ 25 ms; ≥ 90% of requests'."""
    shown = ", ".join(f"{m} ≤ {t * 1e3:g} ms" for m, t in slo.slo_targets.items())
    return f"{shown}; ≥ {slo.slo_attainment:.0%} of requests"


def _wrap(text: str, indent: str = INDENT) -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def probe_figures(p: Probe) -> str:
    """'92% good (36 of 39) [80–97%], 4702.4 good tok/s of 5094.3 tok/s', pooled over its parts."""
    low, high = p.interval() or (0.0, 0.0)
    window = p.window_s
    good_tok_s = sum(((c.slo.good_output_tok_s or 0) if c.slo else 0) * (c.load.duration_s or 0) for c in p.parts)
    parts = f"; {len(p.parts)} parts, {window:.1f} s" if len(p.parts) > 1 else ""
    return (f"{p.attainment:4.0%} good ({p.good} of {p.scheduled}) [{low:.0%}–{high:.0%}]{parts}  goodput "
            f"{p.good / window if window else 0:.2f} req/s, {good_tok_s / window if window else 0:.1f} good tok/s "
            f"of {p.tok_s:.1f} tok/s")


def probe_lines(verdict: str, cfg: SearchConfig, x: float, p: Probe | None) -> list[str]:
    if p is None:
        return [f"  {verdict:<6} {cfg.name(x):<12} not measured"]
    lines = _wrap(f"  {verdict:<6} {cfg.name(x):<12} {probe_figures(p)}")
    early = [i.reason for c in p.parts for i in c.incidents if i.kind is IncidentKind.OVERSATURATED]
    if early:
        lines += _wrap(INDENT + early[0])
    if p.capped:
        lines += _wrap(f"{INDENT}decided at the request cap: the interval still straddles {p.required:.0%}")
    return lines


def again_lines(cfg: SearchConfig, a: Again) -> list[str]:
    """'  again  c=8  38% good, 150.2 tok/s → 100% good, 560.1 tok/s: disagreed, the second counts (why)'."""
    verdict = "disagreed, the second counts; the knee leaves it out" if a.disagreed else "agreed"
    text = (f"  again  {cfg.name(a.load):<12} {a.first.attainment:.0%} good, {a.first.tok_s:.1f} tok/s → "
            f"{a.second.attainment:.0%} good, {a.second.tok_s:.1f} tok/s: {verdict} ({a.why})")
    return _wrap(text)


def answer_lines(cfg: SearchConfig, context: int, b: Bracket) -> list[str]:
    what = "concurrency" if cfg.over == SearchOver.CONCURRENCY else "request rate"
    if b.drift is not None:
        head = f"ctx={context}: no answer: the server drifted during the search  ({len(b.probes)} cells)"
    else:
        shown = f"{b.met:g}" if b.met is not None else "none"
        head = f"ctx={context}: highest {what} that meets the SLO: {shown}  ({len(b.probes)} cells; {b.ended})"
    lines = _wrap(head, "    ")
    if b.drift is None:
        for c in caveats(b, cfg):
            lines += _wrap(f"  caveat {c.reason}")
    if b.met is not None:
        lines += probe_lines("met", cfg, b.met, b.latest.get(b.met))
    if b.missed is not None:
        lines += probe_lines("missed", cfg, b.missed, b.latest.get(b.missed))
    for a in b.again:
        lines += again_lines(cfg, a)
    if b.controls:
        last = b.drift or b.controls[-1]
        lines += _wrap(f"  drift  control probe measured again {len(b.controls)}×: {last.sentence}")
    return lines


def search_text(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: Sequence[CellResult], cap: int = 0) -> str:
    """The whole answer, replayed from the cells (`search_walk.replay`), one block per prompt length."""
    by_key = _by_key(cells)
    lines = _wrap(f"search over {cfg.over}: SLO {targets_text(slo)}; resolution {resolution_text(cfg)}", "    ")
    for ctx in contexts:
        lines += answer_lines(cfg, ctx, replay(cfg, ctx, by_key, cap))
    return "\n".join(lines)


def _probe_json(p: Probe) -> dict[str, Any]:
    return {"attainment": p.attainment, "good": p.good, "scheduled": p.scheduled, "output_tok_s": p.tok_s,
            "parts": len(p.parts), "met": p.met}


def answer_json(b: Bracket, cfg: SearchConfig) -> dict[str, Any]:
    """One prompt length's answer in the results' `search` part: no `met` when the server drifted; the cells
    (their `again`) that the met and missed ends' verdicts pool; the answer's caveats (none without one)."""
    again = [{"load": a.load, "first": _probe_json(a.first), "again": _probe_json(a.second), "why": a.why,
              "disagreed": a.disagreed} for a in b.again]
    def parts(x: float | None) -> list[int]:
        return [c.key.again for c in b.latest[x].parts] if x in b.latest else []
    return {"met": None if b.drift is not None else b.met, "missed": b.missed, "probes": b.probes,
            "met_parts": parts(b.met), "missed_parts": parts(b.missed),
            "ended": b.ended, "complete": b.complete and b.drift is None, "again": again,
            "control_checks": len(b.controls), "drift": b.drift.to_json() if b.drift is not None else None,
            "capped": b.capped, "caveats": [] if b.drift is not None else [c.to_json() for c in caveats(b, cfg)]}


def _by_key(cells: Sequence[CellResult]) -> dict[CellKey, CellResult]:
    return {c.key: c for c in cells}


def search_section(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: Sequence[CellResult],
                   cap: int = 0) -> dict[str, Any]:
    """The results document's `search` part: the settings and, per prompt length, the bracket found."""
    by_key = _by_key(cells)
    answers = {str(ctx): answer_json(replay(cfg, ctx, by_key, cap), cfg) for ctx in contexts}
    return {"over": cfg.over, "start": cfg.start, "growth": cfg.growth, "limit": cfg.limit,
            "resolution": cfg.resolution, "relative": cfg.relative, "max_cells": cfg.max_cells,
            "min_requests": cfg.min_requests, "min_s": cfg.min_s, "max_requests": cfg.max_requests,
            "drift_check": cfg.drift_check, "drift_every": cfg.drift_every, "slo_targets": slo.slo_targets,
            "slo_attainment": slo.slo_attainment, "answers": answers}


def search_complete(doc: dict[str, Any] | None, contexts: list[int]) -> bool:
    """The results document's search found its answer for every prompt length (a resumed sweep skips it)."""
    answers = ((doc or {}).get("search") or {}).get("answers") or {}
    return all((answers.get(str(ctx)) or {}).get("complete") for ctx in contexts)


def capacity_ranking(runs: list[Run]) -> str | None:
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
        shown = "drifted" if a.get("drift") else "none met" if a["met"] is None else f"{a['met']:g}"
        bracket = f" (missed at {a['missed']:g})" if a.get("missed") is not None else ""
        noted = a.get("caveats") or []
        caveat = f"; caveats: {', '.join(c['end'] + ' end ' + c['kind'] for c in noted)}" if noted else ""
        lines += _wrap(f"  ctx={ctx:<6} {name:<24} {shown:>8}{bracket}  {len(a['probes'])} cells; {a['ended']}"
                       f"{caveat}", "    ")
    return "\n".join(lines)
