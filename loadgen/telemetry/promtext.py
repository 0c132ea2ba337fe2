"""Prometheus exposition text → a flat list of samples, for any server's `/metrics`.

`parse_samples(text)` returns `Sample(name, labels, value)` tuples, one per sample line, with the metric
name exactly as the server wrote it. It reads SGLang (`sglang:` names with colons), vLLM (`vllm:`),
dcgm-exporter (upper-case `DCGM_FI_*`) and OpenMetrics text alike.

Why not use `prometheus_client.parser.text_string_to_metric_families` directly: given `# TYPE x counter`
it renames a counter sample `x` to `x_total`, so dcgm-exporter's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`
would come back under a name the exporter never served. We drop the comment lines (HELP/TYPE/EOF), so
every sample keeps its own name, and parse the rest with that parser. A line the parser rejects is
skipped (and counted), never fatal: one malformed metric must not cost us every other figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


class ParsedText(NamedTuple):
    samples: list[Sample]
    skipped_lines: int


def _metric_name(line: str) -> str:
    end = len(line)
    for sep in ("{", " ", "\t"):
        i = line.find(sep)
        if i != -1 and i < end:
            end = i
    return line[:end]


def _sample_lines(text: str, names: frozenset[str] | None) -> list[str]:
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if names is not None and _metric_name(line) not in names:
            continue
        lines.append(line)
    return lines


def _parse_lines(lines: list[str]) -> list[Sample]:
    return [
        Sample(s.name, s.labels, float(s.value))
        for family in text_string_to_metric_families("\n".join(lines) + "\n")
        for s in family.samples
    ]


def parse_text(text: str, names: Iterable[str] | None = None) -> ParsedText:
    """Parse exposition text; keep only metrics in `names` when given (cheaper: the rest is not parsed)."""
    lines = _sample_lines(text, frozenset(names) if names is not None else None)
    try:
        return ParsedText(_parse_lines(lines), 0)
    except ValueError:
        pass
    samples: list[Sample] = []
    skipped = 0
    for line in lines:  # slow path, only for text with a bad line in it
        try:
            samples.extend(_parse_lines([line]))
        except ValueError:
            skipped += 1
    return ParsedText(samples, skipped)


def parse_samples(text: str, names: Iterable[str] | None = None) -> list[Sample]:
    """The samples of `text` as (name, labels, value); malformed lines are skipped."""
    return parse_text(text, names).samples


def parse_types(text: str) -> dict[str, str]:
    """`# TYPE name kind` declarations: {family name: "counter" | "gauge" | "histogram" | ...}."""
    types = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "#" and parts[1] == "TYPE":
            types[parts[2]] = parts[3]
    return types


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def render_family(name: str, kind: str, help_text: str, rows: Iterable[tuple[dict[str, str], float]]) -> str:
    """One metric family in text format 0.0.4: HELP, TYPE, then one line per (labels, value).

    Labels are written in the dict's order (dcgm-exporter's order matters to nobody but humans, and
    humans compare). Integral values are written without a decimal point, as Go exporters do.
    """
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in rows:
        label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
        out.append(f"{name}{{{label_text}}} {_format_value(value)}" if label_text else f"{name} {_format_value(value)}")
    return "\n".join(out) + "\n"
