"""The sweep on disk as a whole: the lock on its folder and `sweep.json`, the summary of every
configuration; and the summary printed at the end."""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime

from loadgen.console import WIDTH, wrap
from loadgen.errors import UsageError
from loadgen.files import write_json_atomic
from loadgen.names import CellStatus, ConfigStatus
from loadgen.record import CellKey
from loadgen.report.compare import Run, compare_table, load_inputs
from loadgen.report.verdict_text import verdict_lines
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import check_names, measured
from loadgen.results.correctness import produced_garbage
from loadgen.results.schema import SWEEP_SCHEMA
from loadgen.results.stored import ok_keys, stored_cells
from loadgen.results.verdict import verdicts
from loadgen.search.text import capacity_ranking
from loadgen.sweep import state
from loadgen.sweep.spec import SweepSpec


def lock_dir(out_dir: str):
    fh = open(os.path.join(out_dir, ".lock"), "a+")  # noqa: SIM115 - held open: the lock lives as long as it
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise UsageError(f"another sweep is writing to {out_dir}; wait for it to end or choose another "
                         "--out-dir") from None
    return fh


def write_summary(spec: SweepSpec, order: list[CellKey], started_at: str) -> dict:
    configs = []
    for cfg in spec.configs:
        paths = state.paths(spec.out_dir, cfg.name)
        doc = state.load_doc(paths["results"]) or {}
        attempts = (doc.get("sweep") or {}).get("attempts", [])
        cells = stored_cells(doc)
        last = attempts[-1] if attempts else {}
        ready = (last.get("readiness") or {})
        configs.append({
            "name": cfg.name, "params": cfg.params,
            "status": state.config_status(cells, order, attempted=bool(attempts),
                                          searched=doc if spec.search else None,
                                          contexts=spec.matrix.get("contexts", [])),
            "reason": last.get("reason"), "cells_ok": len(ok_keys(cells)),
            "cells_total": len(cells) if spec.search else len(order),  # a search: the probes it measured
            "attempts": len(attempts), "ready_s": ready.get("elapsed_s"),
            "results": os.path.basename(paths["results"]), "records": os.path.basename(paths["records"]),
            "diagnostics": (os.path.basename(paths["diagnostics"]) if os.path.exists(paths["diagnostics"])
                            else None),
            "garbage_cells": [c.key.label() for c in cells if produced_garbage(c)],
            "cells_cut_short": [c.key.label() for c in cells if c.status is CellStatus.OK and not c.finished],
            "drift": doc.get("drift"),  # the control measured again and the verdict (docs/drift.md); None: not checked
            **_checked(cells),
        })
    summary = {"schema": SWEEP_SCHEMA, "name": spec.name, "file": os.path.abspath(spec.path),
               "source": spec.text, "started_at": started_at,
               "updated_at": datetime.now(UTC).isoformat(), "matrix": spec.matrix, "configs": configs,
               "verdict": [v.to_json() for v in verdicts(_results(spec, configs))]}
    write_json_atomic(os.path.join(spec.out_dir, "sweep.json"), summary)
    return summary


def _results(spec: SweepSpec, configs: list[dict]) -> list[Run]:
    """Each configuration's results as compare reads them, from the files the summary lists."""
    out = []
    for c in configs:
        path = os.path.join(spec.out_dir, c["results"])
        if doc := state.load_doc(path):
            out.append(Run(c["name"], path, doc, {x.key: x for x in stored_cells(doc)}))
    return out


def _checked(cells: list[CellResult]) -> dict:
    """cells_measured (their figures stand, a failed check or not) and failed_checks {cell label: 'garbage
    output, missed SLO'} for the measured cells that failed a check."""
    shown = [c for c in cells if measured(c)]
    return {"cells_measured": len(shown),
            "failed_checks": {c.key.label(): names for c in shown if (names := check_names(c))}}


def _measured_note(c: dict) -> str:
    """', 4 measured (failed a check: garbage output)' when cells that are not ok were measured all the same."""
    extra = (c.get("cells_measured") or 0) - c["cells_ok"]
    checks = (c.get("failed_checks") or {}).values()
    kinds = ", ".join(dict.fromkeys(k for names in checks for k in names.split(", ")))
    return f", {extra} more measured (failed a check: {kinds})" if extra > 0 and kinds else ""


def print_summary(spec: SweepSpec, summary: dict) -> None:
    print(f"\nsweep {spec.name} ({spec.out_dir}):")
    for c in summary["configs"]:
        note = f"  {c['reason']}" if c["status"] != ConfigStatus.OK and c["reason"] else ""
        cells = f"{c['cells_ok']}/{c['cells_total']} cells ok{_measured_note(c)}"
        cut = f", {len(c['cells_cut_short'])} cut short" if c.get("cells_cut_short") else ""
        # a failed configuration's reason is long (the gate's last state): wrapped under its cells, never cut
        print(wrap(f"  {c['name']:<20} {c['status']:<8} {cells}{cut}{note}", WIDTH, " " * 30))
        if c.get("garbage_cells"):
            print(wrap(f"  {'':<20} GARBAGE OUTPUT in {', '.join(c['garbage_cells'])} (--verify): never best", WIDTH,
                       " " * 30))
    runs = load_inputs([spec.out_dir])
    if any(r.cells for r in runs):
        print()
        print(compare_table(runs, baseline=None))
    lines = verdict_lines(verdicts(runs), WIDTH)
    if lines:
        print()
        print("\n".join(lines))
    capacity = capacity_ranking(runs)
    if capacity:
        print()
        print(capacity)
