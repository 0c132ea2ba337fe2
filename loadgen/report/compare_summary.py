"""The regression gate's verdict as text under compare's table, or as Markdown for a pull-request comment or
`$GITHUB_STEP_SUMMARY` (pure: a `regression_gate.GateResult` in, text out). docs/ci.md."""

from __future__ import annotations

import textwrap

from loadgen.report import text_table as tt
from loadgen.report.compare_terms import CheckTerm, FigureTerm
from loadgen.report.regression_gate import FAILING, GateResult, GateRow, Verdict

MARKS = {Verdict.REGRESSED: "❌", Verdict.NOT_MEASURED: "❌", Verdict.CHECK_FAILED: "❌", Verdict.WITHIN_NOISE: "≈",
         Verdict.WITHIN_LIMIT: "✅", Verdict.NO_BASELINE: "➖", Verdict.CHECK_PASSED: "✅"}
ONE_MEASUREMENT = ("some cells were measured once: their intervals hold the noise between requests, not between "
                   "runs (server state, a busy machine), so a gate on them can fail on noise; --repeat 3 measures it")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def verdict_text(result: GateResult) -> str:
    """'2 regressions beyond noise, 1 figure not measured, 1 failed check' or 'no regression beyond noise' (with
    the changes past a limit that stayed within noise, when there are some)."""
    counts = ((Verdict.REGRESSED, "regression", " beyond noise"), (Verdict.NOT_MEASURED, "figure", " not measured"),
              (Verdict.CHECK_FAILED, "failed check", ""))
    parts = [_plural(n, word) + tail for verdict, word, tail in counts if (n := result.count(verdict))]
    text = ", ".join(parts) or "no regression beyond noise"
    noise = result.count(Verdict.WITHIN_NOISE)
    past = "past its limit" if noise == 1 else "past their limits"
    return text + (f" ({_plural(noise, 'change')} {past} within noise)" if noise else "")


def verdict_line(result: GateResult) -> str:
    """The first line of the Markdown summary: '❌ 2 regressions beyond noise' / '✅ no regression beyond noise'."""
    return f"{'❌' if result.failed else '✅'} {verdict_text(result)}"


def _number(row: GateRow, x: float | None) -> str:
    if x is None or not isinstance(row.term, FigureTerm):  # a check's row has no number
        return tt.MISSING
    return format(x, row.term.figure.fmt)


def _value(row: GateRow, which: str) -> str:
    """'386.1 ±0.5': the figure and the half-width of its 95 % interval (compare's '±95%'); a check's row says
    whether the run passed it."""
    if isinstance(row.term, CheckTerm):
        return ("failed" if row.in_baseline else "passed") if which == "a" else "failed"
    x, interval = (row.a, row.a_interval) if which == "a" else (row.b, row.b_interval)
    half = "" if interval is None or x is None else f" ±{_number(row, (interval[1] - interval[0]) / 2)}"
    return _number(row, x) + half


def _change(row: GateRow) -> str:
    if isinstance(row.term, CheckTerm):
        return ""
    if row.a is None or row.b is None:
        return tt.MISSING
    relative = "" if row.change is None else f"{row.change * 100:+.1f}% "
    return f"{relative}({row.b - row.a:+{row.term.figure.fmt}} {row.term.figure.unit})"


def _cell(row: GateRow) -> str:
    return f"ctx {_ctx(row)} {'rate' if row.key.request_rate else 'conc'} {_load(row)}"


def _ctx(row: GateRow) -> str:
    return str(row.key.context_tokens or tt.DATASET)


def _load(row: GateRow) -> str:
    return f"{row.key.request_rate:g}/s" if row.key.request_rate else str(row.key.concurrency)


def shown_rows(result: GateResult) -> list[GateRow]:
    """The rows the summaries list: every judged figure, and the checks that failed (those passed: one line)."""
    return [r for r in result.rows if isinstance(r.term, FigureTerm) or r.verdict is Verdict.CHECK_FAILED]


def passed_checks(result: GateResult) -> list[str]:
    """The check terms no compared cell failed."""
    failed = {r.term for r in result.rows if r.verdict is Verdict.CHECK_FAILED}
    return [t.text for t in result.terms if isinstance(t, CheckTerm) and t not in failed]


def notes(result: GateResult) -> list[str]:
    """What the reader should know beside the verdicts: checks passed, terms that gated nothing, one measurement."""
    out = [f"passed in every compared cell: {', '.join(p)}"] if (p := passed_checks(result)) else []
    out += [f"{t.text}: no cell of the baseline has {t.figure.name}; it gates nothing" for t in result.unjudged()]
    out += [f"{name}: not in the baseline; only its checks are judged" for name in result.unpaired]
    return out + ([ONE_MEASUREMENT] if result.one_measurement else [])


def _columns(result: GateResult) -> list[tt.Column]:
    configs = {r.config for r in result.rows}
    width = max([len("config"), *(len(c) for c in configs)])
    cols = [tt.Column("ctx", 6, _ctx), tt.Column("conc", 5, _load),
            tt.Column("config", -width, lambda r: r.config), tt.Column("figure", -11, _label),
            tt.Column("baseline", 14, lambda r: _value(r, "a")), tt.Column("compared", 14, lambda r: _value(r, "b")),
            tt.Column("change", 21, _change), tt.Column("limit", 10, _limit),
            tt.Column("verdict", 0, lambda r: r.verdict.value)]
    return cols if len(configs) > 1 else [c for c in cols if c.header != "config"]


def _limit(row: GateRow) -> str:
    return row.term.limit_text() if isinstance(row.term, FigureTerm) else ""


def render_text(result: GateResult, spec: str) -> str:
    """'gate --fail-on …: FAIL: 2 regressions beyond noise', the judged rows, the reasons and notes."""
    cols = _columns(result)
    rows = shown_rows(result)
    head = f"gate --fail-on {spec}: {'FAIL' if result.failed else 'PASS'}: {verdict_text(result)}"
    out = textwrap.wrap(head, 120, subsequent_indent="    ")
    if rows:
        out += [tt.header(cols).rstrip(), *(tt.line(cols, r).rstrip() for r in rows)]
    reasons = [f"{_cell(r)} {r.config}, {_label(r)}: {r.reason}" for r in rows if r.reason and r.verdict in FAILING]
    return "\n".join(out + [w for n in reasons + notes(result) for w in textwrap.wrap(n, 120, subsequent_indent="    ")])


def _label(row: GateRow) -> str:
    return row.term.figure.name if isinstance(row.term, FigureTerm) else row.term.text


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _interval(row: GateRow, iv: list[float] | None) -> str:
    return tt.MISSING if iv is None else f"{_number(row, iv[0])}–{_number(row, iv[1])}"


def _md_row(row: GateRow, with_config: bool) -> str:
    figure = isinstance(row.term, FigureTerm)
    intervals = f"{_interval(row, row.a_interval)} / {_interval(row, row.b_interval)}" if figure else ""
    a, b = (_number(row, row.a), _number(row, row.b)) if figure else (_value(row, "a"), _value(row, "b"))
    verdict = f"{MARKS[row.verdict]} {row.verdict}" + (f": {row.reason}" if row.reason else "")
    cells = [_cell(row), *([row.config] if with_config else []), _label(row), a, b, _change(row), intervals,
             _limit(row), verdict]
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def render_markdown(result: GateResult, spec: str, baseline: str, compared: str, table_md: str) -> str:
    """The verdict line first, what was compared, the gated figures per cell (A, B, change, 95 % intervals,
    limit, verdict), the notes, then compare's whole table folded (`<details>`)."""
    with_config = len({r.config for r in result.rows}) > 1
    head = ["cell", *(["configuration"] if with_config else []), "figure", f"A: {baseline}", f"B: {compared}",
            "change", "95 % intervals A / B", "limit", "verdict"]
    out = [f"### {verdict_line(result)}", "",
           f"`loadgen compare --fail-on {_md(spec)}`: {_md(compared)} against the baseline {_md(baseline)}", ""]
    rows = shown_rows(result)
    if rows:
        out += ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head),
                *(_md_row(r, with_config) for r in rows), ""]
    out += [f"- {n}" for n in notes(result)]
    out += ["", "<details><summary>the whole comparison</summary>", "", table_md, "", "</details>", ""]
    return "\n".join(out)
