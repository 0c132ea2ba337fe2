"""How a cell's measured requests ended: {ok, failed, cancelled, abandoned, by_outcome}.

`cancelled` are the requests the client itself cut short (a second Ctrl-C or the end of --drain-timeout
cancels those in flight; a worker process that died leaves its requests cancelled): no answer of the server
was wrong, so they are counted apart from `failed` (every other outcome but ok). Files written before the
split have no `cancelled` and count them in `failed`; every reader goes through `scheduled` and `not_ok`,
which are right for both. `abandoned` are the requests the client closed on purpose (`--cancel-fraction`):
scheduled, never a failure; the key is there only when some were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.metrics.record_table import RecordTable
from loadgen.names import Outcome
from loadgen.record import OUTCOMES, Record


def request_counts(recs: Sequence[Record] | RecordTable) -> dict:
    """{ok, failed, cancelled, abandoned, by_outcome}: every measured request counts once, under its outcome;
    failed = every outcome but ok, cancelled and abandoned; abandoned only when some were."""
    by_outcome: Counter[str] = Counter(RecordTable.of(recs).labels("outcome").tolist())
    ok, cancelled, abandoned = by_outcome[Outcome.OK], by_outcome[Outcome.CANCELLED], by_outcome[Outcome.ABANDONED]
    counts = {"ok": ok, "failed": len(recs) - ok - cancelled - abandoned, "cancelled": cancelled}
    if abandoned:
        counts["abandoned"] = abandoned
    return counts | {"by_outcome": {o: by_outcome[o] for o in OUTCOMES if by_outcome[o]}}


def not_ok(requests: Mapping[str, Any]) -> int:
    """failed + cancelled: the measured requests that did not succeed."""
    return (requests.get("failed") or 0) + (requests.get("cancelled") or 0)


def scheduled(requests: Mapping[str, Any]) -> int:
    """ok + failed + cancelled + abandoned: every measured request that was scheduled and ended."""
    return (requests.get("ok") or 0) + not_ok(requests) + (requests.get("abandoned") or 0)
