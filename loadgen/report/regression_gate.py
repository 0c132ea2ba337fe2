"""`loadgen compare A B --fail-on TERMS`: whether B regressed against the baseline A beyond a limit and beyond
noise (pure: compare's rows in, verdicts out). docs/ci.md.

A figure term (`compare_terms.FigureTerm`) judges each cell both runs hold, matched as compare matches them
(context, concurrency, request rate):
- worse = (B − A) · d, where d = +1 when a rise is a regression and −1 when a drop is; relative terms divide it
  by |A| (`worse_by`);
- beyond the limit: worse > limit;
- beyond noise: the 95 % interval of B's change against A, from the two figures' intervals (a bootstrap over
  one measurement's requests, or Student's t over `--repeat N`'s measurements: `metrics/cell_noise.py`), lies
  wholly on the worse side (`beyond_noise`: the verdict's margin, `results/verdict.margin`, the rule compare's
  `*`/`~` marks use). A figure without an interval (power, J/token, good tok/s) is judged by the limit alone;
- a change beyond the limit and beyond noise is REGRESSED (exit 1); beyond the limit but inside noise, WITHIN_NOISE
  (exit 0); a figure A has and B lacks (B's cell not measured, or not there) is NOT_MEASURED (exit 1).
A check term (`CheckTerm`) fails on every cell of B that fails the check, whether or not A passed it: garbage
output is wrong whatever the baseline did, and a check has no noise to weigh. The verdict says whether A failed
it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from loadgen.metrics.confidence import overlap
from loadgen.names import Better
from loadgen.record import CellKey
from loadgen.report.compare import Row, Run, cell_row
from loadgen.report.compare_terms import CHECK_KINDS, CheckTerm, FigureTerm, GateCheck, Term
from loadgen.results.verdict import Estimate, margin


class Verdict(StrEnum):
    REGRESSED = "regressed"  # beyond the limit and beyond noise
    WITHIN_NOISE = "within noise"  # beyond the limit, the intervals overlap
    WITHIN_LIMIT = "within limit"  # no worse than the limit (an improvement too)
    NOT_MEASURED = "not measured"  # the baseline has the figure, B does not
    NO_BASELINE = "no baseline"  # the baseline lacks the figure: nothing to judge
    CHECK_FAILED = "failed check"
    CHECK_PASSED = "passed"


FAILING = frozenset({Verdict.REGRESSED, Verdict.NOT_MEASURED, Verdict.CHECK_FAILED})

Interval = Sequence[float] | None


def worse_by(term: FigureTerm, a: float, b: float) -> float:
    """(B − A) · d (d = +1 when a rise is the regression, −1 when a drop is), divided by |A| for a relative term
    (A = 0: ±inf when B differs, else 0)."""
    worse = (b - a) * (1 if term.worse is Better.HIGH else -1)
    if not term.relative:
        return worse
    if a:
        return worse / abs(a)
    return 0.0 if not worse else (float("inf") if worse > 0 else float("-inf"))


def beyond_noise(term: FigureTerm, a_interval: Interval, b_interval: Interval, a: float | None = None,
                 b: float | None = None) -> bool | None:
    """Whether B is worse than A beyond noise: the 95 % interval of A's margin over B (`verdict.margin`, with A
    as the leader and the term's better direction) lies above 0; None when either figure has no interval or a
    value ≤ 0. Without `a`, `b`: each interval's midpoint."""
    if a_interval is None or b_interval is None:
        return None
    a = (a_interval[0] + a_interval[1]) / 2 if a is None else a
    b = (b_interval[0] + b_interval[1]) / 2 if b is None else b
    if a <= 0 or b <= 0 or a_interval[0] <= 0 or b_interval[0] <= 0:
        return None if overlap(a_interval, b_interval) else (
            b_interval[0] > a_interval[1] if term.worse is Better.HIGH else b_interval[1] < a_interval[0])
    m = margin(Estimate("A", a, (a_interval[0], a_interval[1]), (a,)), Estimate("B", b, (b_interval[0], b_interval[1]),
                                                                                (b,)), term.worse is not Better.HIGH)
    return m.interval is not None and m.interval[0] > 0


def judge(term: FigureTerm, a: float | None, b: float | None, a_interval: Interval = None,
          b_interval: Interval = None) -> Verdict:
    """The verdict of one figure of one cell (values and intervals in the same unit; see the module docstring)."""
    if a is None:
        return Verdict.NO_BASELINE
    if b is None:
        return Verdict.NOT_MEASURED
    if worse_by(term, a, b) <= term.limit:
        return Verdict.WITHIN_LIMIT
    return Verdict.WITHIN_NOISE if beyond_noise(term, a_interval, b_interval, a, b) is False else Verdict.REGRESSED


@dataclass(frozen=True, slots=True)
class GateRow:
    """One judged figure or check of one cell of one compared configuration. Figures in the term's unit;
    `change` = B / A − 1 (None without both); `reason`: why B's cell has no figure or failed the check."""

    key: CellKey
    config: str
    term: Term
    verdict: Verdict
    a: float | None = None
    b: float | None = None
    a_interval: list[float] | None = None
    b_interval: list[float] | None = None
    change: float | None = None
    reason: str = ""
    in_baseline: bool = False  # a check the baseline failed too


@dataclass
class GateResult:
    terms: list[Term]
    rows: list[GateRow] = field(default_factory=list)
    one_measurement: bool = False  # some gated cell was measured once: its intervals miss the run-to-run noise
    unpaired: list[str] = field(default_factory=list)  # compared configurations the baseline lacks

    def count(self, *verdicts: Verdict) -> int:
        return sum(r.verdict in verdicts for r in self.rows)

    @property
    def failed(self) -> bool:
        return any(r.verdict in FAILING for r in self.rows)

    def unjudged(self) -> list[FigureTerm]:
        """The figure terms no cell of the baseline has a figure for: they gate nothing."""
        judged = {r.term for r in self.rows if r.verdict is not Verdict.NO_BASELINE}
        return [t for t in self.terms if isinstance(t, FigureTerm) and t not in judged]


def _shown(term: FigureTerm, row: Row | None) -> tuple[float | None, list[float] | None]:
    if row is None:
        return None, None
    interval = row["intervals"].get(term.figure.key)
    scaled = None if interval is None else [term.figure.shown(x) for x in interval]
    return term.figure.shown(row.get(term.figure.key)), scaled


def figure_row(term: FigureTerm, key: CellKey, base: Row, row: Row | None, config: str,
               missing: str = "no such cell") -> GateRow:
    """The verdict of `term` for one cell: the baseline's row against B's (None: B has no such cell, `missing`)."""
    (a, a_iv), (b, b_iv) = _shown(term, base), _shown(term, row)
    verdict = judge(term, a, b, a_iv, b_iv)
    reason = "" if b is not None else missing if row is None else row["error"] or f"no {term.figure.name}"
    change = b / a - 1 if a and b is not None else None
    return GateRow(key, config, term, verdict, a, b, a_iv, b_iv, change, reason)


def _failed(check: GateCheck, row: Row | None) -> str | None:
    """Why the row's cell fails `check`, or None."""
    if row is None:
        return None
    if check is GateCheck.FAILED:
        return None if row["measured"] else row["error"] or "not measured"
    found = [why for kind, why in zip(row["checks"], row["check_reasons"]) if kind == CHECK_KINDS[check]]
    return found[0] if found else None


def check_row(term: CheckTerm, key: CellKey, base: Row | None, row: Row) -> GateRow:
    why = _failed(term.check, row)
    verdict = Verdict.CHECK_PASSED if why is None else Verdict.CHECK_FAILED
    in_baseline = _failed(term.check, base) is not None
    return GateRow(key, row["config"], term, verdict, reason=why or "", in_baseline=in_baseline)


Pair = tuple[Run | None, Run | None]  # (the baseline's configuration, the compared one); None: that side lacks it


def pairs(runs: list[Run], base: int) -> list[Pair]:
    """Every configuration against the baseline (`compare A B C --baseline A`)."""
    return [(runs[base], r) for i, r in enumerate(runs) if i != base]


def pairs_by_name(baseline: list[Run], compared: list[Run]) -> list[Pair]:
    """Two inputs' configurations paired (`compare A B`, A and B results files or sweeps): one each, that pair;
    else by name (a sweep's configurations), in order, a name only one side has paired with None."""
    if len(baseline) == 1 and len(compared) == 1:
        return [(baseline[0], compared[0])]
    a, b = {r.name: r for r in baseline}, {r.name: r for r in compared}
    return [(a.get(name), b.get(name)) for name in dict.fromkeys([*a, *b])]


def _missing_config(term: Term, key: CellKey, base: Row | None) -> GateRow | None:
    """A cell of a baseline configuration the compared run lacks: its figures are not measured, it failed `failed`."""
    if base is None:  # a cell of neither run
        return None
    why = "the configuration is not in the compared run"
    if isinstance(term, FigureTerm):
        return figure_row(term, key, base, None, base["config"], why)
    if term.check is GateCheck.FAILED:
        return GateRow(key, base["config"], term, Verdict.CHECK_FAILED, reason=why)
    return None


def gate_pair(a: Run | None, b: Run | None, terms: list[Term]) -> tuple[list[GateRow], bool]:
    """Every term judged for every cell of one pair of configurations (see the module docstring), and whether
    some cell of either was measured once (no `--repeat`)."""
    rows, once = [], False
    for key in sorted({*(a.cells if a else {}), *(b.cells if b else {})}):
        base = cell_row(a, key, a.cells[key], a) if a and key in a.cells else None
        row = cell_row(b, key, b.cells[key], b) if b and key in b.cells else None
        once |= any(x is not None and not x["repeated"] for x in (base, row))
        for term in terms:
            if b is None:
                found = _missing_config(term, key, base)
            elif isinstance(term, FigureTerm):
                found = figure_row(term, key, base, row, b.name) if base is not None else None
            else:
                found = check_row(term, key, base, row) if row is not None else None
            rows += [found] if found else []
    return rows, once


def gate(compared: list[Pair], terms: list[Term]) -> GateResult:
    """The terms judged for every pair of configurations (`pairs`, `pairs_by_name`)."""
    result = GateResult(terms)
    for a, b in compared:
        rows, once = gate_pair(a, b, terms)
        result.rows += rows
        result.one_measurement |= once
        result.unpaired += [b.name] if a is None and b is not None else []
    return result
