"""Whether a cell was measured, whether it passed its checks, and why not: the one judgement that the run, the
table, `compare`, the rankings and the report all call, so a cell is shown, marked or left out alike in every view.

Two questions, apart:
- `measured(cell)`: its figures are a measurement (`unmeasured` says why not: skipped, a failed measurement
  — the server went away, a worker died, nothing succeeded — or too many failed requests). Only such cells
  leave the plots and show no figures.
- `passed_checks(cell)`: a measured cell can still fail a check (`failed_checks`: garbage output, an output
  mismatch, a missed SLO, a saturated client). Its figures stay in every view, marked with the reason, and it
  is never named best (`not_best`); garbage and mismatch also fail the cell (status failed, exit 1).

A cell is usable when it was measured (status ok) and the requests that did not succeed (failed, and
cancelled by the client: `metrics/counts.py` counts them apart) are at most `max_failed_fraction` of the
requests it scheduled. Failures below the limit leave the cell usable; `failure_note` says how many there
were. Messages say "failed" only of failed requests and "cancelled" of cancelled ones. Requests closed on
purpose (`abandoned`, `--cancel-fraction`) are scheduled and never count against the cell.

Every judgement reads the typed cell (`CellResult`); a file's cells are read back once, where the file is
loaded (`cell_result.from_json`), so an older file is judged as this loadgen judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from loadgen.config import RunConfig
from loadgen.metrics.counts import not_ok, scheduled
from loadgen.names import CellStatus, Outcome
from loadgen.results.cell_result import CellResult
from loadgen.results.correctness import produced_garbage
from loadgen.results.figures import RequestCounts
from loadgen.results.incidents import Effect, Incident, IncidentKind, measurement

DEFAULT_MAX_FAILED_FRACTION = RunConfig.max_failed_fraction  # defined once, with the run's settings


def requests_failed_fraction(req: RequestCounts) -> float | None:
    """(failed + cancelled) / scheduled (scheduled = ok + failed + cancelled; `counts.not_ok`,
    `counts.scheduled`). None when nothing was scheduled."""
    n = scheduled(req)
    return not_ok(req) / n if n else None


def failed_fraction(cell: CellResult) -> float | None:
    """`requests_failed_fraction` over the cell's measured requests."""
    return requests_failed_fraction(cell.requests.requests)


def max_failed_fraction(cell: CellResult) -> float:
    """The limit the cell was judged by (stored in the cell; the default for files written before it was)."""
    return _limit(cell.requests.max_failed_fraction)


def _limit(stored: float | None) -> float:
    return DEFAULT_MAX_FAILED_FRACTION if stored is None else float(stored)


def did_not_succeed(req: RequestCounts) -> str:
    """'12 failed', '64 cancelled' or '2 failed and 3 cancelled' (cancelled: cut short by the client)."""
    parts = [f"{n} {what}" for n, what in ((req.get("failed") or 0, "failed"), (req.get("cancelled") or 0, "cancelled"))
             if n]
    return " and ".join(parts) or "0 failed"


def _verb(req: RequestCounts) -> str:
    """How the requests that did not succeed ended: 'failed', 'were cancelled', or both with their counts."""
    failed, cancelled = req.get("failed") or 0, req.get("cancelled") or 0
    if not cancelled:
        return "failed"
    return "were cancelled" if not failed else f"failed or were cancelled ({failed} failed, {cancelled} cancelled)"


def _outcomes(req: RequestCounts) -> str:
    by = req.get("by_outcome") or {}
    return ", ".join(f"{n} {o}" for o, n in by.items() if o not in (Outcome.OK, Outcome.ABANDONED) and n)


def _too_many(req: RequestCounts, limit: float) -> str | None:
    frac = requests_failed_fraction(req)
    if frac is None or frac <= limit:
        return None
    return (f"{not_ok(req)} of {scheduled(req)} requests {_verb(req)} ({frac:.1%} > {limit:g} "
            f"--max-failed-fraction): {_outcomes(req)}")


def too_many_failed(cell: CellResult) -> str | None:
    """'12 of 64 requests failed (18.8% > 1% --max-failed-fraction): 12 http_error', or None."""
    return _too_many(cell.requests.requests, _limit(cell.requests.max_failed_fraction))


def problem(cell: CellResult) -> str | None:
    """Why the cell does not stand as a passing measurement: not measured (`unmeasured`), or failed by a check
    (garbage output, output mismatch: its status); None when it is ok and usable. The search and the run's
    verdict judge by it; the views ask `measured` and `failed_checks` apart."""
    if cell.status != CellStatus.OK:
        return cell.error or cell.status
    return too_many_failed(cell)


def unmeasured(cell: CellResult) -> str | None:
    """Why the cell's figures are not a measurement (skipped, a failed measurement, too many failed requests),
    or None when it was measured, whether or not its checks passed. A failed cell without a failed check among
    its incidents (a hand-written or older file) is judged by its status alone."""
    if cell.status != CellStatus.OK and not any(i.effect is Effect.CHECK for i in cell.incidents):
        return cell.error or cell.status
    verdict = measurement(cell.incidents)
    if verdict.status is not CellStatus.OK:
        return verdict.error or verdict.status
    return too_many_failed(cell)


def measured(cell: CellResult) -> bool:
    """The cell's figures are a measurement: shown in every table and plot (marked when a check failed)."""
    return unmeasured(cell) is None


def usable(cell: CellResult) -> bool:
    """Measured and ok: it stands as a passing measurement (`problem` None)."""
    return problem(cell) is None


def _failure_note(req: RequestCounts, limit: float) -> str | None:
    if not not_ok(req) or _too_many(req, limit) is not None:
        return None
    return f"{not_ok(req)} of {scheduled(req)} {_verb(req)}: {_outcomes(req)}"


def failure_note(cell: CellResult) -> str | None:
    """The failures of a usable cell, for its note: '2 of 256 failed: 1 timeout, 1 http_error', or None."""
    return _failure_note(cell.requests.requests, _limit(cell.requests.max_failed_fraction))


def requests_incidents(req: RequestCounts, limit: float | None) -> list[Incident]:
    """What a freshly measured cell's request counts say, judged by `limit` (--max-failed-fraction; None: the
    default): nothing succeeded, more failed than the limit allows, or some failed below it (a note)."""
    if req["ok"] == 0:
        return [Incident(IncidentKind.NOTHING_SUCCEEDED, f"no request succeeded ({did_not_succeed(req)})")]
    too_many = _too_many(req, _limit(limit))
    if too_many:
        return [Incident(IncidentKind.FAILED_REQUESTS, too_many)]
    note = _failure_note(req, _limit(limit))
    return [Incident(IncidentKind.SOME_FAILED, note)] if note else []


def missed_slo(cell: CellResult) -> str | None:
    """'missed its SLO (attainment 72% < 90%)' for a cell measured with latency targets that it missed."""
    slo = cell.slo
    if slo is None or slo.met is not False:
        return None
    shown = "no request scheduled" if slo.attainment is None else f"attainment {slo.attainment:.0%}"
    return f"missed its SLO ({shown} < {slo.attainment_required or 0:.0%})"


def client_saturated(cell: CellResult) -> str | None:
    """Why the cell's client is known to have fallen behind ('client saturated: …'), or None."""
    client = cell.telemetry.client or {}
    if not (client.get("saturated") or cell.has(IncidentKind.CLIENT_SATURATED)):
        return None
    return "client saturated: " + ("; ".join(client.get("reasons") or []) or "see its note")


class CheckKind(StrEnum):
    """The checks a measured cell can fail; the value is the short name the views show ("hollow: garbage
    output")."""

    GARBAGE = "garbage output"
    MISMATCH = "output mismatch"
    SLO = "missed SLO"
    SATURATED = "client saturated"
    DRIFTED = "server drifted"


# the incidents that are failed checks (`Effect.CHECK`), by the check they stand for
CHECK_INCIDENTS = {IncidentKind.GARBAGE_OUTPUT: CheckKind.GARBAGE, IncidentKind.OUTPUT_MISMATCH: CheckKind.MISMATCH,
                   IncidentKind.DRIFTED: CheckKind.DRIFTED}


@dataclass(frozen=True, slots=True)
class FailedCheck:
    """One check a measured cell failed: which, and the one-line reason a person reads."""

    kind: CheckKind
    reason: str


def failed_checks(cell: CellResult) -> list[FailedCheck]:
    """The checks the cell failed: its failing incidents (garbage, mismatch, drift) as recorded, then SLO, client;
    empty when it passed them all. Judged whether or not the cell was measured (views ask `measured` first)."""
    found = [FailedCheck(CHECK_INCIDENTS[i.kind], i.reason) for i in cell.incidents if i.effect is Effect.CHECK]
    if produced_garbage(cell) and not any(f.kind is CheckKind.GARBAGE for f in found):
        found.insert(0, FailedCheck(CheckKind.GARBAGE, "garbage output"))  # a file without its incident
    for kind, reason in ((CheckKind.SLO, missed_slo(cell)), (CheckKind.SATURATED, client_saturated(cell))):
        if reason:
            found.append(FailedCheck(kind, reason))
    return found


def passed_checks(cell: CellResult) -> bool:
    return not failed_checks(cell)


def check_names(cell: CellResult) -> str:
    """'garbage output, missed SLO': the short names of the checks the cell failed ('' when none)."""
    return ", ".join(dict.fromkeys(f.kind.value for f in failed_checks(cell)))


def cut_short(cell: CellResult) -> str | None:
    """'cut short: stopped early: 35 measured requests not sent' for a cell an interrupt or a server that went
    away stopped before every measured request was sent (its figures cover part of the cell), or None."""
    found = next((i.reason for i in cell.incidents if i.kind is IncidentKind.INTERRUPTED), None)
    return None if found is None else f"cut short: {found}"


def not_best(cell: CellResult) -> str | None:
    """Why this cell may not be named best in compare and the report, or None when it may: it was not measured
    (`unmeasured`), or it failed a check (`failed_checks`: its outputs were garbage or differed under --verify
    exact, it missed its latency targets, its client fell behind and its latencies are partly the client's), or
    it was cut short (`cut_short`: part of the cell, not a measurement of it)."""
    checks = failed_checks(cell)
    return unmeasured(cell) or (checks[0].reason if checks else None) or cut_short(cell)
