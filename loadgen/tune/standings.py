"""Where the tune stands, read from the folder: every configuration's results, which configurations are
infeasible and why, and the verdict at each wanted load over the feasible ones (`results.verdict`).

A configuration is infeasible when its last visit did not bring the server up (the reconfigure command failed,
the readiness gate gave up) or a cell of that visit failed (the server died under load, too many requests
failed), or the measurement itself crashed. An interrupted visit judges nothing. Infeasible is for every load:
a server that dies at c=32 is no answer at c=1 either, since the load a deployment sees is never held below the
one it was tuned at. The configuration is named at each load with its reason and never ranked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from loadgen.names import CellStatus
from loadgen.results.cell_result import CellResult
from loadgen.results.compare_inputs import Run
from loadgen.results.incidents import IncidentKind
from loadgen.results.objectives import SPECS, ObjectiveSpec
from loadgen.results.stored import stored_cells
from loadgen.results.verdict import (
    BetweenRuns,
    Decision,
    Estimate,
    Load,
    Verdict,
    configurations,
    repeated_values,
    verdict_at,
)
from loadgen.sweep import state
from loadgen.tune.spec import TuneSpec

TELLING = re.compile(r"error|fault|crash|illegal|killed|fatal|exception|out of memory|oom|abort", re.IGNORECASE)
TAIL_LINES = 20  # of the diagnostics output, stored and printed


@dataclass(frozen=True)
class Infeasible:
    """A configuration that could not serve: why (one line), where (the load it failed at; None: it never came
    up), and the end of what the diagnostics command printed."""

    name: str
    reason: str
    load: Load | None
    diagnostics_tail: str | None

    def sentence(self) -> str:
        """'b64t8: the server died under load at c=32: loadgen-sim: fault: crashing: …'."""
        telling = telling_line(self.diagnostics_tail or "")
        return f"{self.name}: {self.reason}" + (f": {telling}" if telling and telling not in self.reason else "")

    def to_json(self) -> dict[str, Any]:
        load = self.load
        return {"name": self.name, "reason": self.reason, "sentence": self.sentence(),
                "context": None if load is None else load.context_tokens,
                "concurrency": None if load is None or load.request_rate is not None else load.concurrency,
                "rate": None if load is None else load.request_rate, "diagnostics_tail": self.diagnostics_tail}


def telling_line(text: str) -> str:
    """The last line of `text` that names an error, a fault or a crash; else its last line (at most 160 chars)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("==== ")]
    found = [ln for ln in lines if TELLING.search(ln)]
    return (found[-1] if found else lines[-1] if lines else "")[:160]


def infeasible_of(name: str, doc: dict[str, Any] | None) -> Infeasible | None:
    """Why the configuration's last visit shows it cannot serve (module docstring), or None."""
    attempts = ((doc or {}).get("sweep") or {}).get("attempts") or []
    if not attempts:
        return None
    last = attempts[-1]
    reason = last.get("reason") or ""
    if last.get("interrupted_by"):
        return None
    tail = _tail(last.get("diagnostics"))
    if not (last.get("readiness") or {}).get("ready"):
        return Infeasible(name, f"the server did not come up: {reason or 'not ready'}", None, tail)
    failed = [c for c in stored_cells(doc) if c.run_id == (doc or {}).get("run_id") and c.status is CellStatus.FAILED]
    if failed:
        return Infeasible(name, _failure(failed[0]), Load.of(failed[0].key), tail)
    if last.get("failure"):  # the measurement crashed, could not start, or met another server
        return Infeasible(name, reason, None, tail)
    return None


def _failure(cell: CellResult) -> str:
    where = Load.of(cell.key).text()
    if cell.has(IncidentKind.SERVER_DOWN):
        return f"the server died under load at {where}"
    return f"failed under load at {where}: {cell.error or 'failed'}"


def _tail(diagnostics: dict[str, Any] | None) -> str | None:
    text = (diagnostics or {}).get("output_tail")
    if not text:
        return None
    return "\n".join(text.rstrip("\n").splitlines()[-TAIL_LINES:])


@dataclass
class Standings:
    """The folder read once: every configuration's results (`runs`: only those with a results file), the
    infeasible ones, and the verdict's settings."""

    names: list[str]
    runs: list[Run]
    infeasible: dict[str, Infeasible]
    spec: ObjectiveSpec
    resolution: float

    @property
    def feasible(self) -> list[Run]:
        return [r for r in self.runs if r.name not in self.infeasible]

    @property
    def between(self) -> BetweenRuns:
        """The noise between runs, the verdict's (`verdict_noise.BetweenRuns`): pooled over every configuration
        measured more than once at a load: a load's parts, the contenders measured again, the control's pairs."""
        loads = list(dict.fromkeys(Load.of(k) for r in self.feasible for k in r.cells))
        return BetweenRuns.of(self.feasible, self.spec.drift,
                              repeated_values(configurations(self.feasible), loads, self.spec))

    def verdict(self, load: Load, without: str | None = None) -> Verdict | None:
        """The verdict at `load` over the feasible configurations (less `without`); None when none has a figure."""
        confs = [c for c in configurations(self.feasible) if c.name != without]
        return verdict_at(confs, load, self.spec, self.resolution, self.between)

    def rival(self, name: str, load: Load) -> Estimate | None:
        """The best other feasible configuration's estimate at `load` (None: no other has one)."""
        v = self.verdict(load, without=name)
        return v.ranked[0] if v is not None and v.ranked else None

    def answer(self, load: Load) -> Verdict:
        """The verdict at `load`, the infeasible and unvisited configurations named among the ineligible."""
        v = self.verdict(load) or Verdict(load, self.spec.objective, Decision.NONE, [], [], None, None, [],
                                          between=self.between)
        measured = {r.name for r in self.runs if r.cells}
        extra = [(i.name, f"infeasible: {i.reason}") for i in self.infeasible.values()]
        extra += [(n, "not measured: the tune's budget was spent first") for n in self.names
                  if n not in measured and n not in self.infeasible]
        return replace(v, ineligible=v.ineligible + extra)

    def cells_of(self, name: str) -> list[CellResult]:
        run = next((r for r in self.runs if r.name == name), None)
        return list(run.cells.values()) if run is not None else []


def read_standings(spec: TuneSpec) -> Standings:
    runs, infeasible = [], {}
    for cfg in spec.configs:
        path = state.paths(spec.out_dir, cfg.name)["results"]
        doc = state.load_doc(path)
        if doc is None:
            continue
        runs.append(Run(cfg.name, path, doc, {c.key: c for c in stored_cells(doc)}))
        found = infeasible_of(cfg.name, doc)
        if found is not None:
            infeasible[cfg.name] = found
    return Standings([c.name for c in spec.configs], runs, infeasible, SPECS[spec.tune.objective],
                     spec.tune.resolution)

