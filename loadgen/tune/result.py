"""`tune.json` (schema loadgen.tune/v1, docs/results.md#the-tune): per wanted load the answer (the verdict over
the feasible configurations, the rest ranked by how much they lose), the infeasible configurations, and the
cost beside what the full grid would have cost. Written after every visit; the last one is the answer."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from loadgen.files import write_json_atomic
from loadgen.results.schema import TUNE_SCHEMA
from loadgen.results.verdict import Load, Verdict, margin
from loadgen.tune.decide import contenders, round_room
from loadgen.tune.plan import measured_requests
from loadgen.tune.spec import TuneSpec
from loadgen.tune.standings import Standings

TUNE_FILE = "tune.json"


def answer_json(v: Verdict, st: Standings, room: int) -> dict[str, Any]:
    """The verdict's entry (`Verdict.to_json`) with `ranking` (every other eligible configuration and the leader's
    margin over it, best first), `contenders` (an open tie's set: who another round of `room` parts would
    measure), `settled` (decided, or tied within the resolution) and `beyond_reach` (a tie not settled that no
    such round could move: its set)."""
    out = v.to_json()
    hib = st.spec.higher_is_better
    ranking = []
    if v.ranked:
        for e in v.ranked[1:]:
            m = margin(v.ranked[0], e, hib)
            ranking.append({"config": e.config, "value": e.value, "loss": m.value,
                            "loss_interval": None if m.interval is None else list(m.interval),
                            "beaten": m.beats(st.resolution)})
    found = contenders(v, hib, st.resolution, room)
    unsettled = contenders(v, hib, st.resolution)
    return out | {"ranking": ranking, "contenders": found, "settled": not unsettled,
                  "beyond_reach": unsettled if unsettled and not found else []}


def _loads_json(load: Load) -> dict[str, Any]:
    return {"context": load.context_tokens,
            "concurrency": load.concurrency if load.request_rate is None else None, "rate": load.request_rate}


def grid_minutes(st: Standings, loads: list[Load], visits: list[dict[str, Any]], grid: dict[str, int],
                 full: dict[Load, int]) -> float | None:
    """What the grid's GPU time would have been, from this tune's own figures: its restarts at the mean readiness
    wait of this tune's, and every cell's requests at the seconds a measured request took at that load here
    (Σ window / Σ requests of the tune's cells there); warmups and the time between cells are left out."""
    ready: list[float] = [v["ready_s"] for v in visits if v["restarted"] and v.get("ready_s") is not None]
    if not ready:
        return None
    total_s = grid["restarts"] * sum(ready) / len(ready)
    for load in loads:
        cells = [c for r in st.runs for c in r.cells.values() if Load.of(c.key) == load and measured_requests(c)]
        window = sum(c.load.duration_s or 0.0 for c in cells)
        n = sum(measured_requests(c) for c in cells)
        if not n:
            return None
        total_s += grid["restarts"] * full[load] * window / n
    return total_s / 60


def tune_document(spec: TuneSpec, st: Standings, loads: list[Load], visits: list[dict[str, Any]], started_at: str,
                  stopped: str | None, complete: bool, grid: dict[str, int], full: dict[Load, int]) -> dict[str, Any]:
    cells = [c for r in st.runs for c in r.cells.values() if measured_requests(c)]
    requests = sum(measured_requests(c) for c in cells)
    configs = []
    for cfg in spec.configs:
        mine = [c for c in st.cells_of(cfg.name) if measured_requests(c)]
        status = "infeasible" if cfg.name in st.infeasible else "measured" if mine else "not measured"
        configs.append({"name": cfg.name, "params": cfg.params, "status": status,
                        "visits": sum(1 for v in visits if v["config"] == cfg.name and v["restarted"]),
                        "cells": len(mine), "requests": sum(measured_requests(c) for c in mine),
                        "results": f"{cfg.name}.json"})
    return {
        "schema": TUNE_SCHEMA, "name": spec.name, "file": os.path.abspath(spec.path), "source": spec.text,
        "started_at": started_at, "updated_at": datetime.now(UTC).isoformat(), "complete": complete,
        "stopped": stopped, "objective": spec.tune.objective.value, "resolution": spec.tune.resolution,
        "settings": spec.tune.to_json() | {"objective": spec.tune.objective.value}, "matrix": spec.matrix,
        "loads": [_loads_json(ld) | {"requests_per_cell": full[ld]} for ld in loads],
        "answers": [answer_json(st.answer(ld), st, round_room(full[ld], ld.concurrency, spec.tune.first_part))
                    for ld in loads],
        "infeasible": [i.to_json() for i in st.infeasible.values()],
        "cells_measured": len(cells), "requests_measured": requests,
        "restarts": sum(1 for v in visits if v["restarted"]),
        "gpu_minutes": sum(v["wall_s"] for v in visits) / 60,
        "grid": grid | {"gpu_minutes_estimate": grid_minutes(st, loads, visits, grid, full)},
        "configs": configs, "visits": visits,
    }


def write_tune(out_dir: str, doc: dict[str, Any]) -> None:
    write_json_atomic(os.path.join(out_dir, TUNE_FILE), doc)
