"""`--slo ttft=300ms,tpot=25ms,e2e=20s` and `--slo-attainment F` → a checked `SloConfig` (exit 2 on bad input)."""

from __future__ import annotations

import argparse
import math
import re

from loadgen.config import DEFAULT_SLO_ATTAINMENT, SloConfig
from loadgen.errors import UsageError
from loadgen.names import SloMetric, values

EXAMPLE = "e.g. --slo ttft=300ms,tpot=25ms,e2e=20s"
UNITS_S = {"ms": 1e-3, "s": 1.0}
_VALUE = re.compile(r"^([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s)$", re.IGNORECASE)  # a sign: -5ms has a unit


def parse_targets(text: str) -> dict[str, float]:
    """'ttft=300ms,e2e=20s' → {'ttft': 0.3, 'e2e': 20.0} (seconds)."""
    targets: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise UsageError(f"--slo {text!r}: {item.strip()!r} is not METRIC=VALUE; {EXAMPLE}")
        if name not in values(SloMetric):
            raise UsageError(f"--slo: unknown metric {name!r}; choose from {', '.join(values(SloMetric))} ({EXAMPLE})")
        if name in targets:
            raise UsageError(f"--slo: {name} is given twice; give each metric once ({EXAMPLE})")
        targets[name] = _seconds(name, value.strip())
    return targets


def _seconds(name: str, value: str) -> float:
    m = _VALUE.match(value)
    if not m:
        raise UsageError(f"--slo {name}={value!r}: give a duration with its unit, ms or s, e.g. {name}=300ms")
    seconds = float(m.group(1)) * UNITS_S[m.group(2).lower()]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"--slo {name}={value}: a target must be > 0, e.g. {name}=300ms")
    return seconds


def slo_config(a: argparse.Namespace) -> SloConfig:
    required = DEFAULT_SLO_ATTAINMENT if a.slo_attainment is None else a.slo_attainment
    if not (0 < required <= 1):
        raise UsageError(f"--slo-attainment {required:g}: give a fraction in (0, 1], e.g. 0.9 (90% of "
                         "requests good)")
    if a.slo is None:
        if a.slo_attainment is not None:
            raise UsageError("--slo-attainment needs targets to attain; add --slo, " + EXAMPLE)
        return SloConfig()
    targets = parse_targets(a.slo)
    return SloConfig(slo_targets=targets, slo_attainment=required)
