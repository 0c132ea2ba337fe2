"""Which telemetry sources a run samples in every cell, from its configuration.

Each builder takes (cfg, target) and returns a list of zero-argument factories; a new source instance is
made for every cell so no state leaks between cells.
"""

from __future__ import annotations

from collections.abc import Callable

from loadgen.telemetry.base import TelemetrySource

Factory = Callable[[], TelemetrySource]


def build_factories(cfg, target) -> list[Factory]:
    factories: list[Factory] = []
    for builder in BUILDERS:
        factories += builder(cfg, target)
    return factories


BUILDERS: list[Callable] = []
