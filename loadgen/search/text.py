"""What `loadgen search` says: per prompt length, the answer, what it rests on that a reader must know (its
caveats: `search/caveats.py`), the two probes that bracket it, the loads measured again and the control
probe's verdict (pure; every line within 120 columns)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from loadgen.config import SloConfig
from loadgen.names import SearchOver
from loadgen.results.cell_result import CellResult
from loadgen.results.compare_inputs import Run
from loadgen.results.incidents import IncidentKind
from loadgen.search.caveats import caveats
from loadgen.search.probes import Again, Probe, SearchConfig, resolution_text
from loadgen.search.result import cells_by_key
from loadgen.search.walk import Bracket, replay

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


def search_text(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: Sequence[CellResult],
                cap: int = 0) -> str:
    """The whole answer, replayed from the cells (`walk.replay`), one block per prompt length."""
    by_key = cells_by_key(cells)
    lines = _wrap(f"search over {cfg.over}: SLO {targets_text(slo)}; resolution {resolution_text(cfg)}", "    ")
    for ctx in contexts:
        lines += answer_lines(cfg, ctx, replay(cfg, ctx, by_key, cap))
    return "\n".join(lines)


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
