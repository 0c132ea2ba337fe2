"""A sweep on disk: one results file per configuration (replaced atomically after every cell), its records
(JSONL), logs, and the sweep summary. Resuming reads these back; nothing else holds state.

    <out_dir>/sweep.json                  sweep summary (schema loadgen.sweep/v1)
    <out_dir>/<config>.json               loadgen.results/v1 of the configuration, plus a "sweep" section
    <out_dir>/<config>.requests.jsonl     one record per request of the finished cells
    <out_dir>/<config>.reconfigure.log    output of every reconfigure run
    <out_dir>/<config>.diagnostics.txt    output of the diagnostics command, per failure
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import orjson

from loadgen.errors import UsageError
from loadgen.files import read_json
from loadgen.names import ConfigStatus
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.stored import kept_cells, ok_keys
from loadgen.search.result import search_complete


def paths(out_dir: str, name: str) -> dict[str, str]:
    base = os.path.join(out_dir, name)
    return {"results": base + ".json", "records": base + ".requests.jsonl",
            "reconfigure": base + ".reconfigure.log", "diagnostics": base + ".diagnostics.txt"}


def load_doc(path: str) -> dict | None:
    """The configuration's stored results, or None when there are none."""
    if not os.path.exists(path):
        return None
    try:
        doc = read_json(path)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path} cannot be read ({exc}); move it away, or pass --force to measure again") \
            from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells", []), list):
        raise UsageError(f"{path} is not a loadgen results file; move it away or choose another --out-dir")
    return doc


def settings_diff(doc: dict, settings: dict) -> list[str]:
    """How the stored settings differ from the current ones ('matrix.max_tokens: 256 → 512')."""
    old = (doc.get("sweep") or {}).get("settings")
    if old is None or not doc.get("cells"):
        return []
    diffs = []
    for section in sorted(set(old) | set(settings)):
        a, b = old.get(section), settings.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    diffs.append(f"{section}.{k}: {a.get(k)} → {b.get(k)}")
        elif a != b:
            diffs.append(f"{section}: {a} → {b}")
    return diffs


def config_status(cells: list[CellResult], wanted: list[CellKey], attempted: bool, searched: dict | None = None,
                  contexts: Sequence[int] = ()) -> ConfigStatus:
    """ok: every cell measured (a search: its answer found for every prompt length, from the results
    document `searched`); partial: some; failed: tried and none; pending: not tried yet."""
    if searched is not None:
        if search_complete(searched, list(contexts)):
            return ConfigStatus.OK
        return ConfigStatus.PARTIAL if ok_keys(cells) else ConfigStatus.FAILED if attempted else ConfigStatus.PENDING
    ok = ok_keys(cells) & set(wanted)
    if len(ok) == len(wanted):
        return ConfigStatus.OK
    if ok:
        return ConfigStatus.PARTIAL
    return ConfigStatus.FAILED if attempted else ConfigStatus.PENDING


def kept_of(doc: dict | None, order: list[CellKey], searched_contexts: list[int] | None) -> list[CellResult]:
    """The stored cells a configuration keeps: those of the matrix, or a search's probes of its prompt lengths."""
    if searched_contexts is None:
        return kept_cells(doc, order)
    return [c for c in kept_cells(doc, None) if c.key.context_tokens in searched_contexts]


def measured_all(doc: dict | None, kept: list[CellResult], order: list[CellKey], searched: bool,
                 contexts: list[int]) -> bool:
    """Nothing is left to measure: every cell of the matrix is kept, or the search found all its answers."""
    return search_complete(doc, contexts) if searched else len(kept) == len(order)
