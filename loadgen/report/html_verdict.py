"""The report's first screen: the answer across configurations (`results/verdict.py`) as HTML. Per prompt
length the regions in one sentence per objective, then one row per load: each objective's winner and margin,
or the tied set; why the output tok/s leader leads (the decomposition, the draft limit, the GPU's side,
confounders); who could not compete there and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.report.html_build import el, text
from loadgen.report.html_tables import swatch
from loadgen.report.verdict_text import RULE, interval_text, margin_text, noise_text, region_text, regions
from loadgen.results.objectives import SPECS, Objective
from loadgen.results.verdict import Decision, Load, Verdict
from loadgen.results.verdict_why import decomposition_text, gpu_text, limit_text, reason_text

if TYPE_CHECKING:
    from matplotlib.typing import ColorType


def _who(names: list[str], colors: dict[str, ColorType]) -> str:
    return ", ".join(el("span", swatch(colors.get(n)) + text(n), class_="who") for n in names)


def answer_cell(v: Verdict | None, colors: dict[str, ColorType]) -> str:
    """One objective's answer at one load: 'b64t8 wins +50% ± 6.8% over b16t8', 'tied: a, b (within noise)'."""
    if v is None:
        return el("td", text("-"))
    if v.decision is Decision.WINS:
        body = _who([v.ranked[0].config], colors) + el("span", text(f"{margin_text(v)} over {v.runner_up}"),
                                                       class_="margin")
        return el("td", body, class_="win", data_metric=v.objective.value, data_decision=v.decision.value,
                  data_winner=v.winner)
    if v.decision is Decision.TIED:
        ahead = "" if v.rest is None else f"; ahead of {v.rest[0]} by {interval_text(v.rest[1])}"
        body = text("tied: ") + _who(v.tied, colors) + el("span", text(f"{margin_text(v)}, {v.tie_reason}{ahead}"),
                                                           class_="margin")
        return el("td", body, class_="tie", data_metric=v.objective.value, data_decision=v.decision.value,
                  data_tied=" ".join(v.tied))
    if v.decision is Decision.ALONE:
        return el("td", text("only ") + _who([v.ranked[0].config], colors), data_metric=v.objective.value,
                  data_decision=v.decision.value, data_winner=v.winner)
    return el("td", text("none eligible"), data_metric=v.objective.value, data_decision=v.decision.value)


def why_cell(v: Verdict | None) -> str:
    if v is None or v.why is None:
        return el("td", "", class_="note")
    w = v.why
    lines = [f"{w.leader} against {w.runner_up}: {decomposition_text(w)}", reason_text(w), limit_text(w),
             gpu_text(w)]
    if w.confounders:
        lines.append("confounders: " + " | ".join(w.confounders))
    body = "".join(el("div", text(line)) for line in lines if line)
    return el("td", body, class_="note why", data_why=v.load.text())


def _table(verdicts: list[Verdict], colors: dict[str, ColorType]) -> str:
    objectives = [o for o in Objective if any(v.objective is o for v in verdicts)]
    loads: list[Load] = list(dict.fromkeys(v.load for v in verdicts))
    by = {(v.load, v.objective): v for v in verdicts}
    out_of = any(v.ineligible for v in verdicts)
    head = el("th", "load") + "".join(
        el("th", text(f"{SPECS[o].title} ({SPECS[o].better})")) for o in objectives)
    head += el("th", text("why (output tok/s)")) + (el("th", text("could not compete")) if out_of else "")
    rows = []
    for load in loads:
        tds = el("td", text(load.text()), class_="num") + "".join(answer_cell(by.get((load, o)), colors)
                                                                  for o in objectives)
        tds += why_cell(by.get((load, Objective.OUTPUT_TOK_S)))
        if out_of:
            seen = dict.fromkeys((c, r) for v in verdicts if v.load == load for c, r in v.ineligible)
            tds += el("td", text("; ".join(f"{c}: {r}" for c, r in seen)), class_="note")
        rows.append(el("tr", tds, data_ctx=load.context_tokens, data_concurrency=load.concurrency,
                       data_rate=load.request_rate))
    table = el("table", el("thead", el("tr", head)) + el("tbody", "".join(rows)), class_="data winners answer",
               data_table="verdict")
    return el("div", table, class_="scroll")


def answer_section(verdicts: list[Verdict], colors: dict[str, ColorType]) -> str:
    """The section's body: the rule in one line, then per prompt length the sentences and the table."""
    if not verdicts:
        return el("p", text("No load was measured usably by two or more configurations: nothing to decide. The "
                            "figures are in the matrices below."), class_="sub")
    parts = [el("p", text(RULE + " " + noise_text(verdicts)), class_="sub")]
    for ctx in dict.fromkeys(v.load.context_tokens for v in verdicts):
        here = [v for v in verdicts if v.load.context_tokens == ctx]
        parts.append(el("h3", text(f"prompt {ctx} tokens" if ctx else "dataset rows")))
        items = []
        for o in Objective:
            mine = [v for v in here if v.objective is o]
            if mine:
                sentence = "; ".join(region_text(r) for r in regions(mine))
                items.append(el("li", el("b", text(SPECS[o].title + ": ")) + text(sentence), data_objective=o.value))
        parts += [el("ul", "".join(items), class_="answer"), _table(here, colors)]
    return "".join(parts)
