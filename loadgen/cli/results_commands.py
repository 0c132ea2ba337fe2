"""`loadgen compare`, `loadgen report` and `loadgen merge`: their arguments, checked here; the work is in
`loadgen.results`."""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from loadgen.cli.checks import check_out_path
from loadgen.errors import UsageError
from loadgen.files import write_atomic, write_json_atomic
from loadgen.results.compare import compare_table, load_inputs
from loadgen.results.merge import check_shards, load, merge
from loadgen.results.report import plots_available, write_plots
from loadgen.results.table import table
from loadgen.sinks.jsonl import requests_path


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="results JSON files (loadgen --out) or sweep folders / sweep.json files")
    p.add_argument("--baseline", metavar="NAME", help="configuration the speed-ups are relative to: its "
                   "name, results path or 1-based position (default: the first)")


def compare_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="loadgen compare", description="Compare runs or sweep configurations "
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
    text = compare_table(runs, a.baseline, a.format)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


def report_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="loadgen report", description="Comparison table and PNG plots of runs "
                                "or sweeps: tok/s vs concurrency, accept length vs budget, tokens per joule.")
    add_input_arguments(p)
    p.add_argument("--plots", default="plots", metavar="DIR",
                   help="folder for the PNG files (default ./plots)")
    a = p.parse_args(argv)
    runs = load_inputs(a.inputs)
    if not runs:
        raise UsageError(f"{' '.join(a.inputs)}: no results to report (the sweep has not measured anything "
                         "yet)")
    parent = os.path.dirname(os.path.abspath(a.plots))
    if not os.path.isdir(parent):
        raise UsageError(f"--plots {a.plots}: folder {parent} does not exist; create it or choose another")
    if not plots_available():
        raise UsageError("plots need matplotlib: pip install 'loadgen[plots]'")
    print(compare_table(runs, a.baseline))
    written, notes = write_plots(runs, a.plots)
    for path in written:
        print(f"plot: {path}")
    for note in notes:
        print(f"note: {note}")
    return 0


def merge_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="loadgen merge",
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
    print(table(doc["cells"]))
    print(f"merged {len(docs)} results ({len(records)} records): {a.out}", file=sys.stderr)
    return 0
