"""`loadgen compare A B --fail-on TERMS`: whether B regressed against the baseline A beyond a limit and beyond
noise (pure: compare's rows in, verdicts out). docs/ci.md.

A figure term (`compare_terms.FigureTerm`) judges each cell both runs hold, matched as compare matches them
(context, concurrency, request rate):
- worse = (B − A) · d, where d = +1 when a rise is a regression and −1 when a drop is; relative terms divide it
  by |A| (`worse_by`);
- beyond the limit: worse > limit;
- beyond noise: the two 95 % intervals of the figure (a bootstrap over one measurement's requests, or Student's
  t over `--repeat N`'s measurements: `metrics/cell_noise.py`) are disjoint, B's on the worse side: B's best
  bound is worse than A's worst (`beyond_noise`), the rule compare's `*`/`~` marks use. A figure without an
  interval (power, J/token, good tok/s) is judged by the limit alone;
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
from loadgen.results.compare_terms import CHECK_KINDS, Better, CheckTerm, FigureTerm, GateCheck, Term


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


def beyond_noise(term: FigureTerm, a_interval: Interval, b_interval: Interval) -> bool | None:
    """Whether B's interval lies wholly on the worse side of A's (disjoint 95 % intervals); None when either
    figure has no interval."""
    if a_interval is None or b_interval is None:
        return None
    if overlap(a_interval, b_interval):
        return False
    return b_interval[0] > a_interval[1] if term.worse is Better.HIGH else b_interval[1] < a_interval[0]


def judge(term: FigureTerm, a: float | None, b: float | None, a_interval: Interval = None,
          b_interval: Interval = None) -> Verdict:
    """The verdict of one figure of one cell (values and intervals in the same unit; see the module docstring)."""
    if a is None:
        return Verdict.NO_BASELINE
    if b is None:
        return Verdict.NOT_MEASURED
    if worse_by(term, a, b) <= term.limit:
        return Verdict.WITHIN_LIMIT
    return Verdict.WITHIN_NOISE if beyond_noise(term, a_interval, b_interval) is False else Verdict.REGRESSED


@dataclass(frozen=True, slots=True)
class GateRow:
    """One judged figure or check of one cell of one compared configuration. Figures in the term's unit;
    `change` = B / A − 1 (None without both); `reason`: why B's cell has no figure or failed the check."""

    key: tuple
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

    def count(self, *verdicts: Verdict) -> int:
        return sum(r.verdict in verdicts for r in self.rows)

    @property
    def failed(self) -> bool:
        return any(r.verdict in FAILING for r in self.rows)

    def unjudged(self) -> list[FigureTerm]:
        """The figure terms no cell of the baseline has a figure for: they gate nothing."""
        judged = {r.term for r in self.rows if r.verdict is not Verdict.NO_BASELINE}
        return [t for t in self.terms if isinstance(t, FigureTerm) and t not in judged]


def _shown(term: FigureTerm, row: dict | None) -> tuple[float | None, list[float] | None]:
    if row is None:
        return None, None
    interval = row["intervals"].get(term.figure.metric)
    scaled = None if interval is None else [term.figure.shown(x) for x in interval]
    return term.figure.shown(row.get(term.figure.metric)), scaled


def figure_row(term: FigureTerm, key: tuple, base: dict, row: dict | None, config: str) -> GateRow:
    """The verdict of `term` for one cell: the baseline's row against B's (None: B has no such cell)."""
    (a, a_iv), (b, b_iv) = _shown(term, base), _shown(term, row)
    verdict = judge(term, a, b, a_iv, b_iv)
    reason = "" if b is not None else "no such cell" if row is None else row["error"] or f"no {term.figure.name}"
    change = b / a - 1 if a and b is not None else None
    return GateRow(key, config, term, verdict, a, b, a_iv, b_iv, change, reason)


def _failed(check: GateCheck, row: dict | None) -> str | None:
    """Why the row's cell fails `check`, or None."""
    if row is None:
        return None
    if check is GateCheck.FAILED:
        return None if row["measured"] else row["error"] or "not measured"
    found = [why for kind, why in zip(row["checks"], row["check_reasons"]) if kind == CHECK_KINDS[check]]
    return found[0] if found else None


def check_row(term: CheckTerm, key: tuple, base: dict | None, row: dict) -> GateRow:
    why = _failed(term.check, row)
    verdict = Verdict.CHECK_PASSED if why is None else Verdict.CHECK_FAILED
    return GateRow(key, row["config"], term, verdict, reason=why or "", in_baseline=_failed(term.check, base) is not None)


def _cell_key(row: dict) -> tuple:
    return row["context_tokens"], row["concurrency"], row.get("request_rate")


def gate(rows: list[dict], configs: Sequence[str], terms: list[Term]) -> GateResult:
    """Every term judged for every cell of every configuration of `configs` but the baseline (`rows`:
    `compare.comparison`'s, one of them the baseline's per cell; `configs`: the compared configurations' names)."""
    result = GateResult(terms)
    by_key: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        by_key.setdefault(_cell_key(row), {})[row["config"]] = row
    for key, cell_rows in by_key.items():
        base = next((r for r in cell_rows.values() if r["baseline"]), None)
        for config in configs:
            row = cell_rows.get(config)
            if (row is not None and row["baseline"]) or (row is None and base is None):
                continue
            for term in terms:
                if isinstance(term, FigureTerm) and base is not None:
                    result.rows.append(figure_row(term, key, base, row, config))
                elif isinstance(term, CheckTerm) and row is not None:
                    result.rows.append(check_row(term, key, base, row))
            result.one_measurement |= row is not None and row["measured"] and not row["repeated"]
    return result
