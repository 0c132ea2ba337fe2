"""The tune file: a sweep file (docs/sweep.md) plus a `[tune]` table, read and checked before anything runs.

    [tune]
    objective = "output_tok_s"   # one of the verdict's objectives (results/objectives.py)
    resolution = 0.02            # a difference smaller than this is a tie (the verdict's 2 %)
    max_cells = 60               # at most this many cells measured (every part counts), unset: no limit
    max_gpu_minutes = 240        # at most this much wall time of restarts, readiness waits and cells
    first_part = 0.25            # a load's first part: this share of requests_per_cell
    rounds = 1                   # visits of the contenders still tied at the end

Each bad value is a UsageError naming the key and the fix (one line, exit 2), as the sweep file's are.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from loadgen.errors import UsageError
from loadgen.files import read_input
from loadgen.names import values
from loadgen.results.objectives import Objective
from loadgen.results.verdict import RESOLUTION
from loadgen.sweep.spec import Config, SweepSpec, parse_spec

TUNE_KEYS = {"objective", "resolution", "max_cells", "max_gpu_minutes", "first_part", "rounds"}


@dataclass(frozen=True)
class TuneSettings:
    objective: Objective = Objective.OUTPUT_TOK_S
    resolution: float = RESOLUTION
    max_cells: int | None = None
    max_gpu_minutes: float | None = None
    first_part: float = 0.25
    rounds: int = 1

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class TuneSpec(SweepSpec):
    """A sweep file with its `[tune]` table. Its cells are parts of a load, smaller than a sweep's: the stored
    settings say so (`settings`), so a sweep never takes a tune's folder for its own, nor a tune a sweep's."""

    tune: TuneSettings = TuneSettings()

    def settings(self, cfg: Config) -> dict[str, Any]:
        return super().settings(cfg) | {"tune": {"first_part": self.tune.first_part}}


def load_tune_spec(path: str, out_dir: str | None = None) -> TuneSpec:
    """The tune file at `path`; its results in `out_dir` (--out-dir) when given."""
    text = read_input(path, "give the path of a tune TOML file", "tune file").decode("utf-8", "replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    return parse_tune_spec(doc, path, text, out_dir)


def tune_out_dir(doc: dict[str, Any], path: str) -> str:
    """Beside the sweep of the same file (its out_dir, else results/<name>, the name the file's stem by default)
    with -tune added, never in it."""
    base, name = doc.get("out_dir"), doc.get("name") or os.path.splitext(os.path.basename(path))[0]
    return (base if isinstance(base, str) and base else os.path.join("results", str(name))) + "-tune"


def parse_tune_spec(doc: dict[str, Any], path: str, text: str = "", out_dir: str | None = None) -> TuneSpec:
    table = doc.pop("tune", None)
    if table is None:
        raise UsageError(f"{path}: the [tune] section is missing; add one (an empty [tune] takes every default: "
                         "see docs/tune.md)")
    if not isinstance(table, dict):
        raise UsageError(f"{path}: tune must be a table ([tune] section)")
    settings = tune_settings(table, f"{path} [tune]")
    # the folder is known before the configurations are read: their {out_dir} is the tune's own
    sweep = parse_spec(doc, path, text, out_dir or tune_out_dir(doc, path))
    _check_matrix(sweep, path)
    return TuneSpec(**{f.name: getattr(sweep, f.name) for f in fields(sweep)}, tune=settings)


def tune_settings(t: dict[str, Any], where: str) -> TuneSettings:
    unknown = sorted(set(t) - TUNE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(TUNE_KEYS))}")
    objective = t.get("objective", Objective.OUTPUT_TOK_S.value)
    if objective not in values(Objective):
        raise UsageError(f"{where}: objective = {objective!r} is unknown; choose one of {', '.join(values(Objective))}")
    resolution = _number(t, "resolution", where, "a fraction between 0 and 1, e.g. 0.02 (2 %)", lambda v: 0 < v < 1)
    first = _number(t, "first_part", where, "a share of requests_per_cell above 0 and at most 1, e.g. 0.25",
                    lambda v: 0 < v <= 1)
    minutes = _number(t, "max_gpu_minutes", where, "a number of minutes > 0, e.g. 240", lambda v: v > 0)
    rounds = _whole(t, "rounds", where, 0)
    return TuneSettings(Objective(objective), RESOLUTION if resolution is None else resolution,
                        _whole(t, "max_cells", where, 1), minutes, 0.25 if first is None else first,
                        1 if rounds is None else rounds)


def _check_matrix(spec: SweepSpec, path: str) -> None:
    """What a tune cannot do with the sweep's matrix: its parts are sized by requests, and repeats are its own."""
    m = spec.matrix
    if spec.search:
        raise UsageError(f"{path}: [search] and [tune] do not mix: a tune compares configurations at the loads of "
                         "[matrix]; drop one of them")
    if "duration_per_cell_s" in m:
        raise UsageError(f"{path} [matrix]: duration_per_cell_s: a tune measures a load in parts of a number of "
                         "requests; give requests_per_cell instead")
    if m.get("repeat", 1) != 1:
        raise UsageError(f"{path} [matrix]: repeat = {m['repeat']!r}: a tune measures a load again itself, where "
                         "the answer is open; drop repeat")


def _number(t: dict[str, Any], key: str, where: str, text: str, ok: Callable[[float], bool]) -> float | None:
    """The key's number (None when not given), refused unless `ok(value)`."""
    v = t.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise UsageError(f"{where}: {key} = {v!r} must be {text}")
    return float(v)


def _whole(t: dict[str, Any], key: str, where: str, least: int) -> int | None:
    v = t.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise UsageError(f"{where}: {key} = {v!r} must be a whole number ≥ {least}")
    return v
