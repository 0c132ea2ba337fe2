"""`loadgen compare --fail-on TERMS`: the terms, parsed (pure). docs/ci.md.

TERMS is a comma-separated list; each term is either
- a figure of the compare table with a limit, `FIGURE:LIMIT`: `out_tok_s:-5%`, `ttft_p50:+10%`, `ttft_p50:+20ms`,
  `out_tok_s:-50`. The sign says which way is a regression (`-` a drop, `+` a rise; no sign: the figure's worse
  way, a drop of a "higher is better" figure). `%` makes the limit relative to the baseline's value; otherwise it
  is absolute, in the figure's unit (`Figure.unit`; a time also in `s`);
- a check (`CheckTerm`): `garbage`, `mismatch`, `slo`, `saturated`, `drift`, `failed` (a cell not measured), or
  `checks` for all of them.
A bad term is a UsageError (exit 2) naming it and what is known.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

from loadgen.errors import UsageError
from loadgen.metrics.catalog import COMPARED, UNITS, Figure
from loadgen.names import Better
from loadgen.results.cell_status import CheckKind

# every figure of the compare table (`compare.METRICS`, the catalog's compared ones), by the name a term gives it,
# and the other names a term may give it (`Figure.aliases`)
FIGURES = {f.name: f for f in COMPARED}
ALIASES = {alias: f.name for f in COMPARED for alias in f.aliases}


class GateCheck(StrEnum):
    """A check term: a cell of B that fails it fails the gate."""

    GARBAGE = "garbage"
    MISMATCH = "mismatch"
    SLO = "slo"
    SATURATED = "saturated"
    DRIFT = "drift"
    FAILED = "failed"  # the cell was not measured (skipped, the server went away, too many failed requests)


ALL_CHECKS = "checks"
# the check of `cell_status.failed_checks` each check term stands for (FAILED: `cell_status.unmeasured`)
CHECK_KINDS = {GateCheck.GARBAGE: CheckKind.GARBAGE, GateCheck.MISMATCH: CheckKind.MISMATCH,
               GateCheck.SLO: CheckKind.SLO, GateCheck.SATURATED: CheckKind.SATURATED,
               GateCheck.DRIFT: CheckKind.DRIFTED}


@dataclass(frozen=True, slots=True)
class FigureTerm:
    """`figure:±limit`: a regression is a change the `worse` way by more than `limit` (a fraction of the
    baseline's value when `relative`, else in the figure's unit)."""

    text: str
    figure: Figure
    worse: Better  # HIGH: a rise is a regression; LOW: a drop is
    limit: float
    relative: bool

    def limit_text(self) -> str:
        sign = "+" if self.worse is Better.HIGH else "-"
        return f"{sign}{self.limit * 100:g}%" if self.relative else f"{sign}{self.limit:g} {self.figure.unit}"


@dataclass(frozen=True, slots=True)
class CheckTerm:
    text: str
    check: GateCheck


Term = FigureTerm | CheckTerm

_LIMIT = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*(%|[a-zA-Z/]*)$")


def known() -> str:
    """What a term may name, for the error of a bad one."""
    return (f"figures {', '.join(FIGURES)} (as FIGURE:-5% or FIGURE:+20ms); checks "
            f"{', '.join(GateCheck)}, or {ALL_CHECKS} for all")


def _bad(term: str, why: str, name_unknown: bool = False) -> UsageError:
    """The one-line error of a bad term; the known names only where the name was what was wrong."""
    return UsageError(f"--fail-on {term!r}: {why}" + (f"; known: {known()}" if name_unknown else "; see docs/ci.md"))


def parse_figure(term: str, name: str, limit: str) -> FigureTerm:
    """`name:limit` → its FigureTerm (see the module docstring)."""
    figure = FIGURES.get(ALIASES.get(name, name))
    if figure is None:
        raise _bad(term, f"no figure {name!r}", name_unknown=True)
    found = _LIMIT.match(limit.strip())
    if not found:
        raise _bad(term, f"the limit {limit!r} is not like -5%, +10% or +20{figure.unit}")
    sign, number, suffix = found.groups()
    value = float(number)
    worse = {"+": Better.HIGH, "-": Better.LOW}.get(sign, Better.LOW if figure.better is Better.HIGH else Better.HIGH)
    if suffix == "%":
        return FigureTerm(term, figure, worse, value / 100, relative=True)
    size = UNITS[figure.unit].get(suffix.lower(), None) if suffix else 1.0
    if size is None:
        raise _bad(term, f"{name} is in {figure.unit}, not {suffix!r}")
    if not math.isfinite(value * size):
        raise _bad(term, "the limit is not a finite number")
    return FigureTerm(term, figure, worse, value * size, relative=False)


def parse_term(term: str) -> list[Term]:
    """One term → its terms (`checks` stands for every check)."""
    name, sep, limit = term.partition(":")
    name = name.strip().lower()
    if sep:
        return [parse_figure(term, name, limit)]
    if name == ALL_CHECKS:
        return [CheckTerm(c.value, c) for c in GateCheck]
    if name in {c.value for c in GateCheck}:
        return [CheckTerm(name, GateCheck(name))]
    figure = FIGURES.get(ALIASES.get(name, name))
    if figure is not None:
        raise _bad(term, f"{name} needs a limit, e.g. {name}:{'-' if figure.better is Better.HIGH else '+'}5%")
    raise _bad(term, f"no figure or check {name!r}", name_unknown=True)


def parse_shown(spec: str) -> tuple[str, ...]:
    """`--show FIGURE,…`: the compared figures whose columns the tables show though the catalog shows them only
    when asked (`catalog.Shown.ASKED`), by the names a term gives them → their keys; an unknown name is a
    UsageError naming the known ones."""
    keys = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        figure = FIGURES.get(ALIASES.get(name.lower(), name.lower()))
        if figure is None:
            raise UsageError(f"--show {name!r}: no such figure; known: {', '.join(FIGURES)}")
        keys.append(figure.key)
    return tuple(keys)


def parse_fail_on(spec: str) -> list[Term]:
    """Every term of `--fail-on` in the order given (empty terms between commas are skipped); at least one."""
    terms = [t for part in spec.split(",") if part.strip() for t in parse_term(part.strip())]
    if not terms:
        raise _bad(spec, "no term")
    return terms
