"""A sweep file's [search] table: each configuration is measured by `loadgen search` (docs/search.md), whose
flags the keys become; the matrix then gives the prompt lengths, and the search chooses the concurrency."""

from __future__ import annotations

from loadgen.errors import UsageError

SEARCH_FLAGS = {  # key → (flag, kind), as table_flags.MATRIX_FLAGS
    "slo": ("--slo", "str"), "slo_attainment": ("--slo-attainment", "float"), "over": ("--over", "str"),
    "start": ("--start", "float"), "growth": ("--growth", "float"), "max": ("--max", "float"),
    "resolution": ("--resolution", "str"), "max_cells": ("--max-cells", "int"),
    "probe_min_requests": ("--probe-min-requests", "int"), "probe_min_seconds": ("--probe-min-seconds", "float"),
    "probe_max_requests": ("--probe-max-requests", "int"), "drift_every": ("--drift-every", "int"),
}


def check_search(search: dict, matrix: dict, path: str) -> None:
    """The [matrix] keys a sweep needs (contexts; concurrency too, unless [search] chooses it), and the one
    key [search] needs (slo)."""
    if search and "slo" not in search:
        raise UsageError(f"{path} [search]: slo is missing; e.g. slo = \"ttft=300ms,tpot=25ms\"")
    if search and "concurrency" in matrix:
        raise UsageError(f"{path} [matrix]: concurrency is chosen by [search]; drop it (start and max bound it)")
    for key in ("contexts",) if search else ("contexts", "concurrency"):
        if key not in matrix:
            raise UsageError(f"{path} [matrix]: {key} is missing; e.g. {key} = [1, 32, 64]")
