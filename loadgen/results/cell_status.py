"""Whether a cell's figures can be used, and why not: the one judgement that the run, the table, `compare` and
the report all call, so a cell is failed (and never named best) in every view or in none.

A cell is usable when it was measured (status ok) and the requests that did not succeed (failed, and
cancelled by the client: `metrics/counts.py` counts them apart) are at most `max_failed_fraction` of the
requests it scheduled. Failures below the limit leave the cell usable; `failure_note` says how many there
were. Messages say "failed" only of failed requests and "cancelled" of cancelled ones. Requests closed on
purpose (`abandoned`, `--cancel-fraction`) are scheduled and never count against the cell.
"""

from __future__ import annotations

from loadgen.config import RunConfig
from loadgen.metrics.counts import not_ok, scheduled
from loadgen.names import CellStatus, Outcome
from loadgen.results.correctness import produced_garbage
from loadgen.results.incidents import Incident, IncidentKind

DEFAULT_MAX_FAILED_FRACTION = RunConfig.max_failed_fraction  # defined once, with the run's settings


def failed_fraction(cell: dict) -> float | None:
    """(failed + cancelled) / scheduled, over the cell's measured requests (scheduled = ok + failed +
    cancelled; `counts.not_ok`, `counts.scheduled`). None when nothing was scheduled."""
    req = cell.get("requests") or {}
    n = scheduled(req)
    return not_ok(req) / n if n else None


def max_failed_fraction(cell: dict) -> float:
    """The limit the cell was judged by (stored in the cell; the default for files written before it was)."""
    limit = cell.get("max_failed_fraction")
    return DEFAULT_MAX_FAILED_FRACTION if limit is None else float(limit)


def did_not_succeed(req: dict) -> str:
    """'12 failed', '64 cancelled' or '2 failed and 3 cancelled' (cancelled: cut short by the client)."""
    parts = [f"{n} {what}" for n, what in ((req.get("failed") or 0, "failed"), (req.get("cancelled") or 0, "cancelled"))
             if n]
    return " and ".join(parts) or "0 failed"


def _verb(req: dict) -> str:
    """How the requests that did not succeed ended: 'failed', 'were cancelled', or both with their counts."""
    failed, cancelled = req.get("failed") or 0, req.get("cancelled") or 0
    if not cancelled:
        return "failed"
    return "were cancelled" if not failed else f"failed or were cancelled ({failed} failed, {cancelled} cancelled)"


def _outcomes(cell: dict) -> str:
    by = (cell.get("requests") or {}).get("by_outcome") or {}
    return ", ".join(f"{n} {o}" for o, n in by.items() if o not in (Outcome.OK, Outcome.ABANDONED) and n)


def too_many_failed(cell: dict) -> str | None:
    """'12 of 64 requests failed (18.8% > 1% --max-failed-fraction): 12 http_error', or None."""
    frac = failed_fraction(cell)
    limit = max_failed_fraction(cell)
    if frac is None or frac <= limit:
        return None
    req = cell["requests"]
    return (f"{not_ok(req)} of {scheduled(req)} requests {_verb(req)} ({frac:.1%} > {limit:g} "
            f"--max-failed-fraction): {_outcomes(cell)}")


def problem(cell: dict) -> str | None:
    """Why the cell's figures must not be used (not measured, failed, too many failed requests), or None
    when it is usable."""
    status = cell.get("status", CellStatus.OK)
    if status != CellStatus.OK:
        return cell.get("error") or status
    return too_many_failed(cell)


def usable(cell: dict) -> bool:
    return problem(cell) is None


def failure_note(cell: dict) -> str | None:
    """The failures of a usable cell, for its note: '2 of 256 failed: 1 timeout, 1 http_error', or None."""
    req = cell.get("requests") or {}
    if not not_ok(req) or too_many_failed(cell) is not None:
        return None
    return f"{not_ok(req)} of {scheduled(req)} {_verb(req)}: {_outcomes(cell)}"


def request_incidents(cell: dict) -> list[Incident]:
    """What a freshly measured cell's request counts say (`cell` holds `requests` and `max_failed_fraction`):
    nothing succeeded, more failed than the limit allows, or some failed below it (a note)."""
    req = cell["requests"]
    if req["ok"] == 0:
        return [Incident(IncidentKind.NOTHING_SUCCEEDED, f"no request succeeded ({did_not_succeed(req)})")]
    too_many = too_many_failed(cell)
    if too_many:
        return [Incident(IncidentKind.FAILED_REQUESTS, too_many)]
    note = failure_note(cell)
    return [Incident(IncidentKind.SOME_FAILED, note)] if note else []


def missed_slo(cell: dict) -> str | None:
    """'missed its SLO (attainment 72% < 90%)' for a cell measured with latency targets that it missed."""
    slo = cell.get("slo") or {}
    if not slo or slo.get("met") is not False:
        return None
    attained = slo.get("attainment")
    shown = "no request scheduled" if attained is None else f"attainment {attained:.0%}"
    return f"missed its SLO ({shown} < {slo.get('attainment_required', 0):.0%})"


def client_saturated(cell: dict) -> str | None:
    """Why the cell's client is known to have fallen behind ('client saturated: …'), or None."""
    client = cell.get("client") or {}
    noted = any(i.get("kind") == IncidentKind.CLIENT_SATURATED for i in cell.get("incidents") or [])
    if not (client.get("saturated") or noted):
        return None
    return "client saturated: " + ("; ".join(client.get("reasons") or []) or "see its note")


def not_best(cell: dict) -> str | None:
    """Why this cell may not be named best in compare and the report, or None when it may: its figures are
    unusable (`problem`), its outputs were garbage (--verify), it missed its latency targets (--slo), or its
    client fell behind (its latencies are partly the client's)."""
    return (problem(cell) or ("garbage output" if produced_garbage(cell) else None) or missed_slo(cell)
            or client_saturated(cell))
