"""`loadgen compare`, `loadgen report` and `loadgen merge`: their arguments, checked here; the work is in
`loadgen.results`."""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from loadgen.cli.checks import check_out_path
from loadgen.cli.help_format import Parser
from loadgen.errors import UsageError
from loadgen.files import write_atomic, write_json_atomic
from loadgen.results.comparable import check_comparable
from loadgen.results.compare import compare_table, load_inputs, pick_baseline
from loadgen.results.merge import check_shards, load, merge
from loadgen.results.report import write_report
from loadgen.results.table import table, title
from loadgen.sinks.jsonl import requests_path


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results JSON files (loadgen --out) or sweep folders / sweep.json files")
    p.add_argument("--baseline", metavar="NAME", help="configuration the speed-ups are relative to: its "
                   "name, results path or 1-based position (default: the first)")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs even when they differ in max "
                   "tokens, API, model, temperature, ignore-eos or prompt source (the differences are printed "
                   "above the table)")


def compare_main(argv: list[str]) -> int:
    p = Parser(prog="loadgen compare", allow_abbrev=False, description="Compare runs or sweep configurations "
                                "cell by cell: output tok/s, per-request tok/s, TTFT, accept length, power, "
                                "J/token.")
    add_input_arguments(p)
    p.add_argument("--format", default="text", choices=("text", "md", "csv"),
                   help="table format (default text)")
    p.add_argument("--out", metavar="FILE", help="also write the table to FILE")
    a = p.parse_args(argv)
    if a.out:
        check_out_path(a.out)
    runs = load_inputs(a.inputs)
    if not runs:
        raise UsageError(f"{' '.join(a.inputs)}: no results to compare (the sweep has not measured anything "
                         "yet)")
    for line in check_comparable(runs, a.allow_mismatch):
        print(line, file=sys.stderr if a.format == "csv" else sys.stdout)
    text = compare_table(runs, a.baseline, a.format)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


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
    for flag, path in (("--plots", a.plots), ("--html", a.html)):
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            raise UsageError(f"{flag} {path}: folder {parent} does not exist; create it or choose another")
    if a.html and os.path.isdir(a.html):
        raise UsageError(f"--html {a.html} is a folder; give a file name, e.g. {os.path.join(a.html, 'report.html')}")
    runs = load_inputs(a.inputs)
    if not runs:
        raise UsageError(f"{' '.join(a.inputs)}: no results to report (the sweep has not measured anything "
                         "yet)")
    for line in check_comparable(runs, a.allow_mismatch):
        print(line)
    print(compare_table(runs, a.baseline))
    written, notes = write_report(runs, a.inputs, pick_baseline(runs, a.baseline), a.plots, a.html)
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
    print(table(doc["cells"], title(doc.get("label"), doc.get("run_id", "merged"))))
    print(f"merged {len(docs)} results ({len(records)} records): {a.out}", file=sys.stderr)
    return 0
