"""`loadgen compare`'s formats for programs: CSV (one line per comparison row) and JSON (the verdict across
configurations and the rows, for a CI job: docs/results.md#verdict)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import orjson

from loadgen.results.verdict import configurations, verdicts

COMPARE_SCHEMA = "loadgen.compare/v1"


def render_json(runs: list[Any], rows: list[dict[str, Any]], resolution: float) -> str:
    """{schema, configurations, resolution, verdict: [`Verdict.to_json`], rows: the comparison's rows} for a CI
    job (docs/results.md#verdict)."""
    shown = [row | {"slo": row["slo"].to_json() if row["slo"] else None,
                    "intervals": {m: list(iv) if iv else None for m, iv in row["intervals"].items()}} for row in rows]
    doc = {"schema": COMPARE_SCHEMA, "configurations": [r.name for r in configurations(runs)],
           "resolution": resolution, "verdict": [v.to_json() for v in verdicts(runs, resolution)], "rows": shown}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()


def render_csv(rows: list[dict[str, Any]], metrics: Sequence[str], speedups: Sequence[str]) -> str:
    fields = ["context_tokens", "concurrency", "config", "status", "measured", *metrics,
              *(m + "_x" for m in speedups), "best", "noise", "checks", "error"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow(row | {"best": " ".join(row["best"]), "noise": " ".join(row["noise"]),
                          "checks": "; ".join(row["checks"])})
    return buf.getvalue()
