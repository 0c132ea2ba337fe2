"""The results file of a run (`--out`, schema loadgen.results/v1): written at setup, replaced atomically
after every cell, so a failure never loses a cell already measured. Its cells are `CellResult`s, written
through their one serialisation (`cell_result.to_json`); docs/results.md describes every field."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

from loadgen import __version__
from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import ERROR_ROOM, UsageError
from loadgen.files import write_json_atomic
from loadgen.record import CellKey, RunAnchor
from loadgen.results.cell_result import CellResult
from loadgen.results.provenance import environment
from loadgen.results.schema import RESULTS_SCHEMA


def requests_path(results_path: str) -> str:
    """The records (JSONL) written beside a results file: `run.json` → `run.requests.jsonl`."""
    base = results_path[:-5] if results_path.endswith(".json") else results_path
    return base + ".requests.jsonl"


def host_identity() -> dict:
    """Which clock the records' monotonic times are on: same boot_id = same CLOCK_MONOTONIC."""
    boot_id = None
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot_id = fh.read().strip()
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "boot_id": boot_id, "pid": os.getpid()}


class ResultsFile:
    """The document and its cells. `kept` are cells measured earlier (a resumed run or sweep) and stay;
    `sections` are extra top-level parts (a sweep's own); with `order`, cells are saved in that order of
    their keys."""

    def __init__(self, path: str, kept: list[CellResult] | None = None, sections: dict | None = None,
                 order: list[CellKey] | None = None, earlier_target: dict | None = None):
        self.path = path
        self.earlier_target = earlier_target
        self.cells: list[CellResult] = list(kept or [])
        self.sections = sections or {}
        self.order = order
        self.doc: dict = {}

    def begin(self, cfg: RunConfig, run_id: str, anchor: RunAnchor, target: dict, prompt_sizing: dict) -> None:
        """Write the document's head; refused (UsageError, before any load) when the kept cells of a resumed
        run were measured on a server of another configuration (`earlier_target`'s fingerprint)."""
        self.check_same_target(target)
        self.doc = {
            "schema": RESULTS_SCHEMA, "label": cfg.label, "run_id": run_id,
            "started_at": datetime.now(UTC).isoformat(), "loadgen_version": __version__,
            "anchor": {"mono_ns": anchor.mono_ns, "wall_ns": anchor.wall_ns},
            "args": cfg.public_args(), "target": target, "prompt_sizing": prompt_sizing,
            "cells": [], "host": host_identity(), "environment": environment(),
        }
        if cfg.parallel.shard:
            self.doc["shard"] = {"index": cfg.parallel.shard[0], "count": cfg.parallel.shard[1]}
        self.save()

    def check_same_target(self, target: dict) -> None:
        old = self.earlier_target
        if not old or not old.get("fingerprint") or old.get("fingerprint") == target.get("fingerprint"):
            return
        spec = [f"{k}: {old.get('spec', {}).get(k)} → {v}" for k, v in (target.get("spec") or {}).items()
                if (old.get("spec") or {}).get(k) != v]
        what = "; ".join(spec) or f"fingerprint {old['fingerprint']} → {target.get('fingerprint')}"
        line = (f"{self.path} was measured on a server of another configuration ({what}); pass --force to replace "
                "it, or another --out to keep both")
        if len(line) > ERROR_ROOM:  # the settings that differ above the error, one a line: the error stays one line
            for item in spec or [f"fingerprint: {old['fingerprint']} → {target.get('fingerprint')}"]:
                log(f"  differs: {item}")
            line = (f"{self.path} was measured on a server of another configuration (above); pass --force to "
                    "replace it, or another --out to keep both")
        raise UsageError(line)

    def add(self, result: CellResult) -> None:
        self.cells.append(result)

    def replace(self, old: CellResult, new: CellResult) -> None:
        """`new` where `old` was (a cell amended after it was added: the drift check's control)."""
        self.cells = [new if c is old else c for c in self.cells]

    def save(self) -> None:
        if self.order is not None:
            rank = {k: i for i, k in enumerate(self.order)}
            self.cells.sort(key=lambda c: rank.get(c.key, len(rank)))
        self.doc.update(self.sections)
        self.doc["cells"] = [c.to_json() for c in self.cells]
        self.doc["updated_at"] = datetime.now(UTC).isoformat()
        write_json_atomic(self.path, self.doc)
