"""The results document's `search` part (`search_section`): the search's settings and, per prompt length, the
answer replayed from the cells (`walk.replay`): its bracket, the probes it pooled, the loads measured again, the
control probe's verdict and the answer's caveats (`caveats.py`); `search_complete` reads it back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadgen.config import SloConfig
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.search.caveats import caveats
from loadgen.search.probes import Probe, SearchConfig
from loadgen.search.walk import Bracket, replay


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


def cells_by_key(cells: Sequence[CellResult]) -> dict[CellKey, CellResult]:
    return {c.key: c for c in cells}


def search_section(cfg: SearchConfig, slo: SloConfig, contexts: list[int], cells: Sequence[CellResult],
                   cap: int = 0) -> dict[str, Any]:
    """The results document's `search` part: the settings and, per prompt length, the bracket found."""
    by_key = cells_by_key(cells)
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
