"""The verdict across configurations (definitions.md#verdict): at each load (prompt length × concurrency or
rate) and for each objective, which configuration serves best, by how much beyond noise, or which are tied.

Per configuration and load an `Estimate`: the figure and its 95 % interval. One measurement: the cell's own
interval (a bootstrap over its requests, or Student's t over `--repeat`). Several (the same configuration in
several results, a search's `again` cells): their mean, with the noise between runs below.

A configuration measured once at a load has only the noise between its requests in its interval; what moves
from one run to the next (the server's state, a busy client) is measured by whatever the results hold twice —
the drift controls (each run's first cell measured again after its last) and configurations measured more than
once — pooled into one relative standard error between runs, s_run (`verdict_noise.BetweenRuns`). A
one-measurement estimate's log-scale standard error is √(s_own² + s_run²); the mean of n measurements has
√((mean s_own² + s_run²) / n). Without either the intervals hold the noise between requests only, and the answer
says so.

The margin of a leader L over another configuration O: m = L/O − 1 (higher is better) or O/L − 1 (lower is
better), ≥ 0 for the leader; its interval from the log ratio, ln(1 + m) ± 1.96·√(s_L² + s_O²), where s is
each estimate's standard error on the log scale, (ln high − ln low) / (2·1.96). L beats O when the interval's
low end is above 0 and m is at least the resolution (`RESOLUTION`, 2 %: a difference too small to be worth a
restart of the server is a tie, whatever the noise). The configurations L does not beat are tied with it;
`decision` is *wins* when L beats every other eligible configuration, else *tied* (the tied set named,
never ranked), *alone* with one eligible configuration, *none* with none.

Eligible: measured, every check passed, and not cut short (`cell_status.not_best`, `cut_short`); the others
are listed apart with their reason, so a margin is never taken against a configuration that could not win.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from loadgen.metrics.client_health import machine_busy
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_status import cut_short, not_best
from loadgen.results.compare_inputs import Run
from loadgen.results.objectives import SPECS, Objective, ObjectiveSpec
from loadgen.results.verdict_noise import Z95, BetweenRuns, Estimate, Margin, estimate, margin
from loadgen.results.verdict_why import Why, explain

__all__ = ["RESOLUTION", "THROUGHPUT", "Z95", "BetweenRuns", "Configuration", "Decision", "Estimate", "Load", "Margin",
           "Verdict", "configurations", "decide", "estimate", "ineligible_reason", "margin", "verdict_at", "verdicts"]

RESOLUTION = 0.02
# the objectives whose leader's why is the output decomposition (accept length × verify steps/s)
THROUGHPUT = (Objective.OUTPUT_TOK_S, Objective.REQUEST_TOK_S, Objective.GOOD_TOK_S)


class Load(NamedTuple):
    """A load the verdict is given at: a cell's key less `again` (every measurement of it counts)."""

    context_tokens: int
    concurrency: int
    request_rate: float | None

    @classmethod
    def of(cls, key: tuple) -> Load:
        """The load of a cell key (a `CellKey`, or a plain tuple of its fields as a caller's own run holds it)."""
        full = CellKey(*key)
        return cls(full.context_tokens, full.concurrency, full.request_rate)

    def text(self) -> str:
        return f"rate {self.request_rate:g}/s" if self.request_rate is not None else f"c={self.concurrency}"


@dataclass
class Configuration:
    """One configuration's results: every input that carries its name (a repeated input's `#2` suffix
    dropped), its cells grouped by load."""

    name: str
    runs: list[Run] = field(default_factory=list)

    def cells(self, load: Load) -> list[CellResult]:
        return [c for r in self.runs for key, c in sorted(r.cells.items(), key=lambda kc: CellKey(*kc[0]))
                if Load.of(key) == load]


def configurations(runs: Sequence[Run]) -> list[Configuration]:
    """The inputs grouped by configuration name, in the order first given."""
    found: dict[str, Configuration] = {}
    for r in runs:
        name = re.sub(r"#\d+$", "", r.name)
        found.setdefault(name, Configuration(name)).runs.append(r)
    return list(found.values())


class Decision(StrEnum):
    WINS = "wins"
    TIED = "tied"
    ALONE = "alone"
    NONE = "none"


@dataclass
class Verdict:
    """The answer at one load for one objective."""

    load: Load
    objective: Objective
    decision: Decision
    ranked: list[Estimate]  # the eligible configurations with the figure, best first
    tied: list[str]  # with TIED: the leader and every configuration it does not beat
    runner_up: str | None
    margin: Margin | None  # the leader's over the runner-up
    ineligible: list[tuple[str, str]]  # (configuration, why it could not win here)
    why: Why | None = None
    between: BetweenRuns = BetweenRuns(None, 0)
    rest: tuple[str, Margin] | None = None  # with TIED: the leader's margin over the best configuration it beats

    @property
    def winner(self) -> str | None:
        return self.ranked[0].config if self.decision in (Decision.WINS, Decision.ALONE) else None

    @property
    def tie_reason(self) -> str | None:
        """With TIED: 'within noise' when some tied configuration's margin interval reaches 0, else 'below the
        resolution' (every difference is beyond noise, and smaller than `RESOLUTION`)."""
        if self.decision is not Decision.TIED or not self.ranked:
            return None
        others = [e for e in self.ranked[1:] if e.config in self.tied]
        noisy = any(not (m := margin(self.ranked[0], e, SPECS[self.objective].higher_is_better)).interval
                    or m.interval[0] <= 0 for e in others)
        return "within noise" if noisy else "below the resolution"

    @property
    def leader(self) -> str | None:
        return self.ranked[0].config if self.ranked else None

    def to_json(self) -> dict:
        """The `verdict[]` entry of docs/results.md."""
        m = self.margin
        return {"context": self.load.context_tokens,
                "concurrency": self.load.concurrency if self.load.request_rate is None else None,
                "rate": self.load.request_rate, "objective": self.objective.value, "decision": self.decision.value,
                "winner": self.winner, "tied": self.tied,
                "tie_reason": self.tie_reason, "runner_up": self.runner_up,
                "margin": None if m is None else m.value,
                "margin_interval": None if m is None or m.interval is None else list(m.interval),
                "estimates": [{"config": e.config, "value": e.value,
                               "interval": None if e.interval is None else list(e.interval),
                               "measurements": list(e.measurements)} for e in self.ranked],
                "ineligible": [{"config": c, "reason": r} for c, r in self.ineligible],
                "between_runs": {"relative_se": self.between.relative_se, "controls": self.between.controls,
                                 "repeated": self.between.repeated, "df": self.between.df},
                "ahead_of_rest": None if self.rest is None else {
                    "config": self.rest[0], "margin": self.rest[1].value,
                    "margin_interval": None if self.rest[1].interval is None else list(self.rest[1].interval)},
                "why": None if self.why is None else self.why.to_json()}


def decide(ranked: list[Estimate], higher_is_better: bool, resolution: float) -> tuple[Decision, list[str],
                                                                                      str | None, Margin | None]:
    """(decision, tied set, runner-up, the leader's margin over it) of estimates ranked best first."""
    if not ranked:
        return Decision.NONE, [], None, None
    if len(ranked) == 1:
        return Decision.ALONE, [], None, None
    leader = ranked[0]
    margins = {e.config: margin(leader, e, higher_is_better) for e in ranked[1:]}
    tied = [leader.config] + [c for c, m in margins.items() if not m.beats(resolution)]
    runner = tied[1] if len(tied) > 1 else ranked[1].config
    return (Decision.TIED if len(tied) > 1 else Decision.WINS), (tied if len(tied) > 1 else []), runner, \
        margins[runner]


def ineligible_reason(cell: CellResult) -> str | None:
    """Why a cell cannot stand in a verdict: not measured, a failed check, or cut short; None when it can. A
    client that fell behind because other processes held the cores says so (`client_health.machine_busy`)."""
    why = not_best(cell) or cut_short(cell)
    client: dict = dict(cell.telemetry.client or {})
    if why and why.startswith("client saturated") and machine_busy(client):
        why += (f" (the machine was busy: other processes kept the client's loop waiting "
                f"{client['runqueue_wait_s']:.1f} s for a core)")
    return why


def _why_nothing(conf: Configuration) -> str:
    """': reconfigure failed: …' — the last sweep attempt's reason of a configuration that measured no cell."""
    attempts = [a for r in conf.runs for a in ((r.doc.get("sweep") or {}).get("attempts") or [])]
    reason = attempts[-1].get("reason") if attempts and isinstance(attempts[-1], dict) else None
    return f": {reason}" if reason else ""


def verdict_at(configs: Sequence[Configuration], load: Load, spec: ObjectiveSpec,
               resolution: float = RESOLUTION, between: BetweenRuns = BetweenRuns(None, 0)) -> Verdict | None:
    """The verdict at `load` for `spec`'s objective; None when no eligible configuration has the figure."""
    estimates, ineligible, eligible_cells = [], [], {}
    for conf in configs:
        cells = conf.cells(load)
        if not cells:
            ineligible.append((conf.name, "not measured at this load" if any(r.cells for r in conf.runs)
                               else f"measured nothing{_why_nothing(conf)}"))
            continue
        ok = [c for c in cells if ineligible_reason(c) is None]
        if not ok:
            ineligible.append((conf.name, ineligible_reason(cells[-1]) or ""))
            continue
        found = estimate(conf.name, ok, spec, between)
        if found is not None:
            estimates.append(found)
            eligible_cells[conf.name] = ok
    if not estimates:
        return None
    ranked = sorted(estimates, key=lambda e: e.value, reverse=spec.higher_is_better)
    decision, tied, runner, m = decide(ranked, spec.higher_is_better, resolution)
    verdict = Verdict(load, spec.objective, decision, ranked, tied, runner, m, ineligible, between=between)
    beaten = [e for e in ranked if e.config not in tied]
    if decision is Decision.TIED and beaten:
        verdict.rest = beaten[0].config, margin(ranked[0], beaten[0], spec.higher_is_better)
    if runner is not None and spec.objective in THROUGHPUT:
        by_name = {c.name: c for c in configs}
        verdict.why = explain(by_name[ranked[0].config], eligible_cells[ranked[0].config],
                              by_name[runner], eligible_cells[runner], [by_name[e.config] for e in ranked],
                              tied=decision is Decision.TIED)
    return verdict


def repeated_values(configs: Sequence[Configuration], loads: Sequence[Load], spec: ObjectiveSpec) -> list[list[float]]:
    """Each configuration × load's figure from every eligible cell, where it was measured more than once."""
    found = []
    for conf in configs:
        for load in loads:
            values = [v for c in conf.cells(load) if ineligible_reason(c) is None and (v := spec.value(c))]
            if len(values) > 1:
                found.append(values)
    return found


def verdicts(runs: Sequence[Run], resolution: float = RESOLUTION,
             objectives: Sequence[Objective] | None = None) -> list[Verdict]:
    """Every load's verdict for every objective some cell has a figure of, loads in cell order, objectives
    in `Objective` order."""
    configs = configurations(runs)
    loads = sorted({Load.of(k) for r in runs for k in r.cells}, key=lambda ld: CellKey(*ld))
    out = []
    for objective in objectives or list(Objective):
        spec = SPECS[objective]
        between = BetweenRuns.of(runs, spec.drift, repeated_values(configs, loads, spec))
        for load in loads:
            found = verdict_at(configs, load, SPECS[objective], resolution, between)
            if found is not None:
                out.append(found)
    return out
