"""Live output verification (`--verify`): each cell's checked outputs, garbage fraction and exact-match fraction,
updated as each verification request ends, so the "garbage output" alert fires while the cell still runs.

The fractions are `loadgen.metrics.correctness.fractions` over the cell's verdicts so far: the cell's result
gives the same values once the cell has ended.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from loadgen.metrics.correctness import fractions
from loadgen.record import Record


class VerifyGauges:
    """The three per-cell verification gauges, labelled like every cell series."""

    def __init__(self, registry: CollectorRegistry, labels: tuple[str, ...]):
        self.checked = Gauge("loadgen_verify_checked_requests", "Verification requests of the cell judged so far "
                             "(--verify).", labels, registry=registry)
        self.garbage = Gauge("loadgen_verify_garbage_ratio", "Garbage outputs / checked verification outputs of "
                             "the cell so far (repetition loop, empty, replacement characters, cut short), "
                             "each judged against its reference output, as the cell is.", labels, registry=registry)
        self.exact = Gauge("loadgen_verify_exact_match_ratio", "Outputs identical to the reference / checked "
                           "verification outputs of the cell so far.", labels, registry=registry)
        self._verdicts: dict[tuple, list[dict]] = {}

    def observe(self, key: tuple, rec: Record) -> None:
        """A verification request ended: its verdict (if it was judged) joins the cell's."""
        verdicts = self._verdicts.setdefault(key, [])
        if rec.ok and rec.verify is not None:
            verdicts.append(rec.verify)
        checked, exact, garbage = fractions(verdicts)
        self.checked.labels(*key).set(checked)
        if garbage is not None:
            self.garbage.labels(*key).set(garbage)
        if exact is not None:
            self.exact.labels(*key).set(exact)
