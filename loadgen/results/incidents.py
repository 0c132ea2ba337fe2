"""What went wrong in a cell, as named values, and the one judgement of its status from them.

Whoever sees something go wrong records an `Incident` (kind + one-line reason) on the cell's result: the
builder (too many failed requests, nothing succeeded, telemetry lost, client saturated), the server-down
policy, a worker that died, a shard without a slot, an interrupt, the sweep's configuration check, a cell that
was never reached. Nobody sets a status: `judge` derives it, every time, from the incidents alone:

- `skipped` when any incident skips the cell (it was never measured: not reached, no slot for this shard);
- else `failed` when any incident fails it (a failed measurement, or a failed check of a measured cell: garbage
  output, an output mismatch); its error is the failing reasons in the order they were seen,
  leaving out the request counts' (too many failed, nothing succeeded) when a cause is named beside them
  (the server went away, a worker died, the configuration changed: the failed requests are its symptom);
- else `ok`. Incidents that only note (telemetry lost, client saturated, failures below the limit, an
  interrupt that stopped the cell early) leave the status alone and appear in the cell's note.

`measurement` judges the same incidents without the failed checks: whether the cell was measured at all, so
its figures stand (shown, marked) even when a check failed it.

`finished` is the one resume rule, for plain runs and sweeps alike: a stored cell is kept (not measured again)
when it is ok and was not stopped early by an interrupt.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from loadgen.names import CellStatus


class Effect(StrEnum):
    """What an incident does to its cell."""

    SKIP = "skip"  # the cell was not measured
    FAIL = "fail"  # the measurement failed: its figures must not be used
    CHECK = "check"  # measured, and failed a check: the cell fails, its figures stand (marked, never best)
    NOTE = "note"  # usable, with a note beside it


class IncidentKind(StrEnum):
    """Everything that can go wrong in a cell, each with its effect (`EFFECTS`)."""

    NOT_REACHED = "not_reached"  # the run stopped before this cell
    INTERRUPTED_BEFORE = "interrupted_before"  # an interrupt stopped the run before this cell: measured on resume
    NO_SLOT = "no_slot"  # a shard whose part of the cell's concurrency is empty
    BEFORE_LOAD = "before_load"  # preparing the cell failed before any request was sent
    NOTHING_SUCCEEDED = "nothing_succeeded"
    FAILED_REQUESTS = "failed_requests"  # more failed than --max-failed-fraction allows
    SERVER_DOWN = "server_down"
    WORKER_DIED = "worker_died"
    WORKER_LOST = "worker_lost"  # --ray: an actor or its node went away; the cell is judged on its requests
    INTERRUPTED = "interrupted"  # stopped early by an interrupt: some measured requests were never sent
    CONFIGURATION_CHANGED = "configuration_changed"  # a sweep's server changed during the cell
    RECORDED = "recorded"  # a failure stored by an older loadgen without its kind
    SOME_FAILED = "some_failed"  # failed requests below the limit
    TELEMETRY_LOST = "telemetry_lost"
    CLIENT_SATURATED = "client_saturated"
    GARBAGE_OUTPUT = "garbage_output"  # --verify: more garbage outputs than --max-garbage-fraction allows
    OUTPUT_MISMATCH = "output_mismatch"  # --verify exact: an output differs from the reference
    OUTPUT_DIVERGED = "output_diverged"  # --verify: an output differs from the reference (no garbage)
    OVERSATURATED = "oversaturated"  # a search's probe stopped early: the server over-saturated, the SLO missed
    MEASURED_AGAIN = "measured_again"  # a search measured this load again (more requests, a contradiction, a check)
    DRIFTED = "drifted"  # the control cell measured again differs beyond noise (`metrics.drift`): the server drifted


EFFECTS: dict[IncidentKind, Effect] = {
    IncidentKind.NOT_REACHED: Effect.SKIP,
    IncidentKind.INTERRUPTED_BEFORE: Effect.SKIP,
    IncidentKind.NO_SLOT: Effect.SKIP,
    IncidentKind.BEFORE_LOAD: Effect.FAIL,
    IncidentKind.NOTHING_SUCCEEDED: Effect.FAIL,
    IncidentKind.FAILED_REQUESTS: Effect.FAIL,
    IncidentKind.SERVER_DOWN: Effect.FAIL,
    IncidentKind.WORKER_DIED: Effect.FAIL,
    IncidentKind.WORKER_LOST: Effect.NOTE,  # its requests in flight failed: --max-failed-fraction judges the cell
    IncidentKind.INTERRUPTED: Effect.NOTE,  # usable figures, but measured again on resume (`finished`)
    IncidentKind.CONFIGURATION_CHANGED: Effect.FAIL,
    IncidentKind.RECORDED: Effect.FAIL,
    IncidentKind.SOME_FAILED: Effect.NOTE,
    IncidentKind.TELEMETRY_LOST: Effect.NOTE,
    IncidentKind.CLIENT_SATURATED: Effect.NOTE,
    IncidentKind.GARBAGE_OUTPUT: Effect.CHECK,
    IncidentKind.OUTPUT_MISMATCH: Effect.CHECK,
    IncidentKind.OUTPUT_DIVERGED: Effect.NOTE,
    IncidentKind.OVERSATURATED: Effect.NOTE,  # its figures hold what was measured; kept on resume
    IncidentKind.MEASURED_AGAIN: Effect.NOTE,
    IncidentKind.DRIFTED: Effect.CHECK,  # its figures stand; the run fails, and the check is made again on resume
}


LEGACY_INTERRUPTED = "not measured: interrupted by "  # an older file's not_reached cell an interrupt stopped
SYMPTOMS = frozenset({IncidentKind.FAILED_REQUESTS, IncidentKind.NOTHING_SUCCEEDED})


@dataclass(frozen=True, slots=True)
class Incident:
    """One thing that went wrong in a cell: its kind and a one-line reason a person reads."""

    kind: IncidentKind
    reason: str

    @property
    def effect(self) -> Effect:
        return EFFECTS[self.kind]

    def to_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict) -> Incident:
        """An incident read back; a kind this version does not know (a newer loadgen's) fails the cell as a
        recorded failure, its kind kept in the reason."""
        try:
            kind, reason = IncidentKind(data["kind"]), str(data["reason"])
        except ValueError:
            return cls(IncidentKind.RECORDED, f"{data['kind']}: {data['reason']}")
        if kind is IncidentKind.NOT_REACHED and reason.startswith(LEGACY_INTERRUPTED):
            kind = IncidentKind.INTERRUPTED_BEFORE  # written before the kind existed: its reason is all it has
        return cls(kind, reason)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A cell's status, its error (None when ok) and the notes of its incidents."""

    status: CellStatus
    error: str | None
    notes: tuple[str, ...]


def finished(incidents: list[Incident] | tuple[Incident, ...]) -> bool:
    """Kept on resume: judged ok, and not stopped early by an interrupt."""
    return judge(incidents).status is CellStatus.OK and not any(i.kind is IncidentKind.INTERRUPTED
                                                                  for i in incidents)


def judge(incidents: list[Incident] | tuple[Incident, ...]) -> Verdict:
    """The one judgement of a cell (module docstring): skipped > failed > ok."""
    notes = tuple(i.reason for i in incidents if i.effect is Effect.NOTE)
    for effects, status in (({Effect.SKIP}, CellStatus.SKIPPED), ({Effect.FAIL, Effect.CHECK}, CellStatus.FAILED)):
        found = [i for i in incidents if i.effect in effects]
        causes = [i for i in found if i.kind not in SYMPTOMS]
        reasons = [i.reason for i in causes or found]
        if reasons:
            return Verdict(status, "; ".join(dict.fromkeys(reasons)), notes)
    return Verdict(CellStatus.OK, None, notes)


def measurement(incidents: list[Incident] | tuple[Incident, ...]) -> Verdict:
    """The judgement of the measurement alone: `judge` of the incidents that are not failed checks. ok means
    the cell was measured and its figures stand, whether or not a check failed it."""
    return judge([i for i in incidents if i.effect is not Effect.CHECK])
