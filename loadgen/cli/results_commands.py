"""`loadgen compare`, `loadgen report` and `loadgen merge`: their arguments, checked here; the work is in
`loadgen.results`."""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from loadgen.cli.checks import check_out_dir, check_out_path
from loadgen.cli.help_format import Parser
from loadgen.errors import UsageError
from loadgen.files import write_atomic, write_json_atomic
from loadgen.report.compare import TableFormat, compare_table, load_inputs, pick_baseline
from loadgen.report.compare_summary import render_markdown
from loadgen.report.compare_summary import render_text as render_gate_text
from loadgen.report.compare_terms import ALL_CHECKS, FIGURES, GateCheck, parse_fail_on, parse_shown
from loadgen.report.regression_gate import gate, pairs, pairs_by_name
from loadgen.report.report import write_report
from loadgen.report.table import table, title
from loadgen.results.comparable import check_comparable
from loadgen.results.document import requests_path
from loadgen.results.merge import check_shards, load, merge
from loadgen.results.stored import stored_cells


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results JSON files (loadgen --out) or sweep folders / sweep.json files")
    p.add_argument("--baseline", metavar="NAME", help="configuration the speed-ups are relative to: its "
                   "name, results path or 1-based position (default: the first)")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs even when they differ in max "
                   "tokens, API, model, temperature, ignore-eos or prompt source (the differences are printed "
                   "above the table)")
    p.add_argument("--show", metavar="FIGURES", type=parse_shown, default=(), help="also give these figures a "
                   f"column in the tables, by the names --fail-on gives them (figures: {' '.join(FIGURES)}; the "
                   "CSV and JSON formats have every one)")


def compare_main(argv: list[str]) -> int:
    p = Parser(prog="loadgen compare", allow_abbrev=False, description="Compare runs or sweep configurations "
                                "cell by cell: output tok/s, per-request tok/s, TTFT, accept length, power, "
                                "J/token; with --fail-on, a regression gate for CI (docs/ci.md).")
    add_input_arguments(p)
    p.add_argument("--format", default=TableFormat.TEXT, choices=list(TableFormat),
                   help="table format (default text); md with --fail-on: the gate's summary for a pull request")
    p.add_argument("--out", metavar="FILE", help="also write the table to FILE")
    p.add_argument("--fail-on", metavar="TERMS", help="exit 1 when a run regresses against the baseline beyond "
                   "a limit and beyond noise, or fails a check: e.g. 'out_tok_s:-5%%,ttft_p50:+10%%,garbage' "
                   f"(figures: {' '.join(FIGURES)}; checks: {' '.join(GateCheck)}, or {ALL_CHECKS} for all; "
                   "docs/ci.md)")
    p.add_argument("--summary-out", metavar="FILE", help="append the Markdown summary to FILE, whatever --format "
                   "says (e.g. \"$GITHUB_STEP_SUMMARY\")")
    a = p.parse_args(argv)
    terms = parse_fail_on(a.fail_on) if a.fail_on is not None else None
    for flag, path in (("--out", a.out), ("--summary-out", a.summary_out)):
        if path:
            check_out_path(path, flag)
    runs = load_inputs(a.inputs)
    if not runs:
        raise UsageError(f"{' '.join(a.inputs)}: no results to compare (the sweep has not measured anything "
                         "yet)")
    if terms is not None and len(runs) < 2:
        raise UsageError(f"--fail-on: {' '.join(a.inputs)} holds one run, nothing to gate it against; give the "
                         "baseline's results and the new run's (loadgen compare BASELINE NEW --fail-on …)")
    for line in check_comparable(runs, a.allow_mismatch):
        print(line, file=sys.stderr if a.format == TableFormat.CSV else sys.stdout)
    text, summary, failed = compare_outputs(runs, a, terms)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if a.summary_out:
        with open(a.summary_out, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
    return 1 if failed else 0


def compare_outputs(runs: list, a: argparse.Namespace, terms: list | None) -> tuple[str, str, bool]:
    """(what compare prints in --format, the Markdown summary, whether the gate failed). Without --fail-on the
    summary is the Markdown table; with it, the gate's verdict is under the text table, is the Markdown, and
    goes to stderr beside a CSV."""
    text = compare_table(runs, a.baseline, a.format, asked=a.show)
    table_md = text if a.format == TableFormat.MD else compare_table(runs, a.baseline, TableFormat.MD, asked=a.show)
    if terms is None:
        return text, table_md, False
    result, baseline, compared = gate_inputs(runs, a, terms)
    summary = render_markdown(result, a.fail_on, baseline, compared, table_md)
    if a.format == TableFormat.MD:
        return summary, summary, result.failed
    gate_text = render_gate_text(result, a.fail_on)
    if a.format == TableFormat.CSV:
        print(gate_text, file=sys.stderr)
        return text, summary, result.failed
    return f"{text}\n\n{gate_text}", summary, result.failed


def gate_inputs(runs: list, a: argparse.Namespace, terms: list) -> tuple:
    """(the gate's result, the baseline's name, the compared runs' names): two inputs without --baseline are
    paired configuration by configuration (two results files, or two sweeps by configuration name); else every
    configuration is gated against the baseline."""
    if len(a.inputs) == 2 and a.baseline is None:
        sides = [load_inputs([path]) for path in a.inputs]
        names = [side[0].name if len(side) == 1 else path for side, path in zip(sides, a.inputs)]
        return gate(pairs_by_name(*sides), terms), names[0], names[1]
    base = pick_baseline(runs, a.baseline)
    others = ", ".join(r.name for i, r in enumerate(runs) if i != base)
    return gate(pairs(runs, base), terms), runs[base].name, others


def report_main(argv: list[str]) -> int:
    p = Parser(prog="loadgen report", allow_abbrev=False, description="Comparison table, PNG plots and one "
                                "self-contained HTML page of runs or sweeps: tok/s, per-request tok/s and TTFT vs "
                                "concurrency, accept length per configuration and source, power and J/token.")
    add_input_arguments(p)
    p.add_argument("--plots", metavar="DIR", help="folder for the PNG files (default ./plots when --html is not "
                   "given)")
    p.add_argument("--html", metavar="FILE", help="write one self-contained HTML page (plots embedded, no "
                   "scripts, nothing fetched)")
    a = p.parse_args(argv)
    if a.plots is None and a.html is None:
        a.plots = "plots"
    if a.html and os.path.isdir(a.html):
        raise UsageError(f"--html {a.html} is a folder; give a file name, e.g. {os.path.join(a.html, 'report.html')}")
    if a.html:  # missing folders are created, as for --out; one that cannot be written in is exit 2 now
        check_out_path(a.html, "--html")
    if a.plots:
        check_out_dir(a.plots, "--plots")
    runs = load_inputs(a.inputs)
    if not runs:
        raise UsageError(f"{' '.join(a.inputs)}: no results to report (the sweep has not measured anything "
                         "yet)")
    for line in check_comparable(runs, a.allow_mismatch):
        print(line)
    print(compare_table(runs, a.baseline, asked=a.show))
    written, notes = write_report(runs, a.inputs, pick_baseline(runs, a.baseline), a.plots, a.html, a.show)
    for path in written:
        print(f"{'page' if path == a.html else 'plot'}: {path}")
    for note in notes:
        print(f"note: {note}")
    return 0


def merge_main(argv: list[str]) -> int:
    p = Parser(prog="loadgen merge", allow_abbrev=False,
                                description="Combine shard results (loadgen --shard i/N) "
                                "into one results file, every figure recomputed from the merged records.")
    p.add_argument("out", help="merged results JSON to write (its records go to <out>.requests.jsonl)")
    p.add_argument("inputs", nargs="+", help="the shards' results JSON files (each with its .requests.jsonl)")
    a = p.parse_args(argv)
    check_out_path(a.out)
    if os.path.abspath(a.out) in {os.path.abspath(x) for x in a.inputs}:
        raise UsageError(f"{a.out}: the output must not be one of the inputs")
    loaded = [load(x) for x in a.inputs]
    docs, rows = [d for d, _ in loaded], [r for _, r in loaded]
    for note in check_shards(docs, a.inputs):
        print(f"loadgen merge: warning: {note}", file=sys.stderr)
    doc, records = merge(docs, rows)
    write_atomic(requests_path(a.out), b"".join(orjson.dumps(r) + b"\n" for r in records))
    write_json_atomic(a.out, doc)
    print(table(stored_cells(doc), title(doc.get("label"), doc.get("run_id", "merged"))))
    print(f"merged {len(docs)} results ({len(records)} records): {a.out}", file=sys.stderr)
    return 0
