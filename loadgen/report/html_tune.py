"""The report's answer of a tune (`loadgen report <tune folder>`): `tune.json`'s own answer, first. The verdict
section after it reads every part as `loadgen compare` does; the tune's answer is the one that leaves out the
infeasible configurations at every load and pools the noise between runs over every pair of parts.

Per wanted load: the winner with its margin and interval, or the tied set (still open, or beyond a round's
reach); the rest ranked by how much they lose; the why. Then the infeasible configurations with the end of their
diagnostics, and the cost beside the full grid's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadgen.report.html_build import el, text
from loadgen.report.html_meta import folder_documents
from loadgen.report.html_tables import swatch
from loadgen.report.tune_text import cost_lines, infeasible_lines, open_lines
from loadgen.results.schema import TUNE_SCHEMA

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

Tune = tuple[dict[str, Any], str]  # a tune.json document and its folder


def tune_documents(paths: list[str]) -> list[Tune]:
    """(tune.json document, its folder) of every input that is a tune's folder or its tune.json."""
    return folder_documents(paths, "tune.json", TUNE_SCHEMA)


def _pct(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return ""
    span = f" [{interval[0] * 100:+.1f}%, {interval[1] * 100:+.1f}%]" if interval else ""
    return f"+{value * 100:.1f}%{span}"


def _load(a: dict[str, Any]) -> str:
    return f"rate {a['rate']:g}/s" if a.get("rate") is not None else f"c={a['concurrency']}"


def _who(names: list[str], colors: dict[str, ColorType]) -> str:
    return ", ".join(el("span", swatch(colors.get(n)) + text(n), class_="who") for n in names)


def _answer(a: dict[str, Any], colors: dict[str, ColorType]) -> str:
    margin = _pct(a.get("margin"), a.get("margin_interval"))
    if a["decision"] == "wins":
        body = _who([a["winner"]], colors) + el("span", text(f" wins by {margin} over {a['runner_up']}"),
                                               class_="margin")
        return el("td", body, class_="win", data_decision="wins", data_winner=a["winner"])
    if a["decision"] == "tied":
        state = "still open" if a.get("contenders") else \
            "beyond one more round's reach" if a.get("beyond_reach") else "settled"
        body = text("tied: ") + _who(a["tied"], colors) + el("span", text(f" ({margin}, {state})"), class_="margin")
        return el("td", body, class_="tie", data_decision="tied", data_tied=" ".join(a["tied"]))
    if a["decision"] == "alone":
        return el("td", text("only ") + _who([a["winner"]], colors), data_decision="alone", data_winner=a["winner"])
    return el("td", text("nothing feasible was measured"), data_decision=a["decision"])


def _ranking(a: dict[str, Any]) -> str:
    rows = [f"{r['config']} +{r['loss'] * 100:.1f}%" + (" (beaten)" if r["beaten"] else " (within noise)")
            for r in a.get("ranking") or []]
    return el("td", text("; ".join(rows)), class_="note")


def tune_section(tune: Tune, colors: dict[str, ColorType]) -> str:
    doc, _ = tune
    state = f"stopped early: {doc['stopped']}" if doc.get("stopped") else \
        "finished" if doc.get("complete") else "not finished: run the same command to go on"
    head = el("p", text(f"tune {doc['name']}: {doc['objective']} at each load, resolution "
                        f"{doc['resolution']:.0%}; {state}. This is tune.json's answer: infeasible configurations "
                        "are never ranked, and the noise between runs is pooled over every configuration measured "
                        "more than once."), class_="sub")
    rows = []
    for a in doc["answers"]:
        why = (a.get("why") or {}).get("text") or ""
        rows.append(el("tr", el("td", text(_load(a)), class_="num") + _answer(a, colors) + _ranking(a)
                       + el("td", text(why), class_="note why"),
                       data_ctx=a["context"], data_concurrency=a.get("concurrency"), data_rate=a.get("rate")))
    table = el("table", el("thead", el("tr", "".join(el("th", text(h)) for h in (
        "load", "the best", "the rest: the leader's margin over each", "why")))) + el("tbody", "".join(rows)),
        class_="data winners answer", data_table="tune")
    notes = [ln.strip() for ln in [*infeasible_lines(doc), *open_lines(doc), *cost_lines(doc)]]
    return head + el("div", table, class_="scroll") + "".join(el("p", text(n), class_="sub") for n in notes)
