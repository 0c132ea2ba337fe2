"""`loadgen compare`'s and the report's inputs: results files (loadgen.results/v1) and sweep folders or
sweep.json files (a tune's folder or tune.json), which stand for their configurations in sweep order; each cell read back into its typed
result and judged as this loadgen judges."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import orjson

from loadgen.errors import UsageError
from loadgen.files import read_input
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.schema import SWEEP_SCHEMA, TUNE_SCHEMA
from loadgen.results.stored import stored_cells


@dataclass
class Run:
    """One configuration's results: its display name, the document, its cells by key, each read back once into
    its typed result (`from_json`) and judged as this loadgen judges."""

    name: str
    path: str
    doc: dict
    cells: dict[CellKey, CellResult] = field(default_factory=dict)

    @property
    def params(self) -> dict:
        return (self.doc.get("sweep") or {}).get("params") or {}

    @property
    def server_info(self) -> dict:
        return (self.doc.get("target") or {}).get("server_info") or {}


def load_inputs(paths: list[str]) -> list[Run]:
    """Runs from results files, sweep folders and sweep.json files, in the order given."""
    runs: list[Run] = []
    for path in paths:
        for p in _expand(path):
            doc = _read(p)
            name = (doc.get("sweep") or {}).get("config") or doc.get("label") or _stem(p)
            cells = {c.key: c for c in stored_cells(doc)}
            runs.append(Run(name=name, path=p, doc=doc, cells=cells))
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.name] = seen.get(r.name, 0) + 1
        if seen[r.name] > 1:
            r.name = f"{r.name}#{seen[r.name]}"
    return runs


def _expand(path: str) -> list[str]:
    """A results file as it is; a sweep's folder or sweep.json (a tune's folder or tune.json) as its configurations'
    results files, in its order."""
    sweep_json = _listing(path) if os.path.isdir(path) else path
    if sweep_json is None:
        raise UsageError(f"{path} is a folder without sweep.json; give results files or a sweep's folder")
    doc = _read(sweep_json)
    if doc.get("schema") not in (SWEEP_SCHEMA, TUNE_SCHEMA):
        return [path]
    base = os.path.dirname(os.path.abspath(sweep_json))
    files = [os.path.join(base, c["results"]) for c in doc.get("configs", [])]
    return [f for f in files if os.path.exists(f)]


def _listing(folder: str) -> str | None:
    """The file that lists a folder's configurations: a sweep's sweep.json, else a tune's tune.json."""
    return next((p for name in ("sweep.json", "tune.json") if os.path.exists(p := os.path.join(folder, name))), None)


def _read(path: str) -> dict:
    raw = read_input(path, "give results JSON files (loadgen --out) or sweep folders")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(doc, dict) or ("cells" not in doc and doc.get("schema") not in (SWEEP_SCHEMA, TUNE_SCHEMA)):
        raise UsageError(f"{path}: not a loadgen results or sweep file (no 'cells'); give loadgen --out "
                         "files")
    return doc


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def pick_baseline(runs: list[Run], baseline: str | None) -> int:
    """Index of the baseline: a name, a results path, or a 1-based position; default the first input."""
    if baseline is None:
        return 0
    for i, r in enumerate(runs):
        if baseline in (r.name, r.path) or os.path.abspath(baseline) == os.path.abspath(r.path):
            return i
    if baseline.isdigit() and 1 <= int(baseline) <= len(runs):
        return int(baseline) - 1
    raise UsageError(f"--baseline {baseline}: no such configuration; choose one of "
                     f"{', '.join(r.name for r in runs)} (or a position 1..{len(runs)})")
