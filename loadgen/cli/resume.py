"""Never lose a run: an existing `--out` is resumed, replaced only with `--force`, refused when it was measured
under other settings.

The same command again keeps the finished cells (`results.stored`: the one rule plain runs and sweeps share —
judged ok, and not stopped early by an interrupt), measures the rest, says so, and appends to the records
(JSONL), keeping only the lines of the kept cells. A file measured with another
matrix, request options or target is refused (exit 2) with the differences, naming `--force` (replace it)
and `--out` (keep both). The target is checked twice: its URL and options here, its fingerprint (the server's
configuration) once discovery has seen it (`ResultsFile.begin`), still before any load.
"""

from __future__ import annotations

import os

from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.files import read_json
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.stored import kept_cells, prune_records, stored_cells
from loadgen.results.table import table
from loadgen.sinks.jsonl import JsonlSink, requests_path

# settings that change how a run is driven or reported, not what a finished cell measured
NOT_COMPARED = frozenset({
    "out", "force", "wait_ready_s", "wait_refused_s", "max_failed_fraction", "drain_timeout_s", "on_server_down",
    "server_down_after", "server_wait_timeout_s", "cell_attempts", "run_id", "start_at", "cell_period_s",
    "metrics_port", "metrics_host", "metrics_linger_s", "timeout_s", "idle_timeout_s", "api_key_env",
    "api_key_file", "telemetry_interval_s", "workers", "http_client", "wide", "drift_check",
})


def args_diff(old: dict, new: dict) -> list[str]:
    """'max_tokens: 256 → 512' for each compared setting stored in both that differs (a setting the older
    file does not know is not a difference)."""
    keys = sorted((set(old) & set(new)) - NOT_COMPARED)
    return [f"{k}: {_show(old[k])} → {_show(new[k])}" for k in keys if _norm(old[k]) != _norm(new[k])]


def _norm(value):
    return list(value) if isinstance(value, tuple) else value


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def load_doc(path: str) -> dict | None:
    """The results already at `--out`, or None when there are none."""
    if not os.path.exists(path):
        return None
    try:
        doc = read_json(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--out {path} exists but cannot be read ({exc}); pass --force to replace it, or "
                         "choose another --out") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells", []), list):
        raise UsageError(f"--out {path} exists and is not a loadgen results file; pass --force to replace it, "
                         "or choose another --out")
    return doc


def earlier_runs(doc: dict) -> list[dict]:
    """The runs an existing file holds cells of: its own earlier runs, then itself."""
    runs = list(doc.get("earlier_runs") or [])
    return runs + [{k: doc.get(k) for k in ("run_id", "started_at", "updated_at")}]


SEARCHED = frozenset({"concurrency", "request_rate"})  # a search's probes are loads it chose, not a matrix


class Resume:
    """What `--out` holds and what this run does with it: `results` (with the kept cells), `sink` (the JSONL,
    appended when resuming), `remaining` (cells to measure). A search (`searched`) keeps finished cells of any
    load of its prompt lengths: they are its earlier probes."""

    def __init__(self, cfg: RunConfig, searched: bool = False):
        self.cfg = cfg
        self.searched = searched
        doc = None if cfg.force else load_doc(cfg.out)
        self.kept = self._kept(doc) if doc else []
        keys = {c.key for c in self.kept}
        self.remaining = [c for c in cfg.cells() if c not in keys]
        records = requests_path(cfg.out)
        self.sink = JsonlSink(records, append=doc is not None, label=cfg.label)
        sections = {"earlier_runs": earlier_runs(doc)} if doc else {}
        target = doc.get("target") if doc and self.kept else None
        self.results = ResultsFile(cfg.out, kept=self.kept, sections=sections, earlier_target=target)
        if doc is not None:
            self._announce(doc, records)

    def _kept(self, doc: dict) -> list[CellResult]:
        diff = args_diff(doc.get("args") or {}, self.cfg.public_args()) if stored_cells(doc) else []
        diff = [d for d in diff if not (self.searched and d.split(":")[0] in SEARCHED)]
        if diff:
            raise UsageError(f"{self.cfg.out} holds a run measured with other settings ({'; '.join(diff)}); "
                             "pass --force to replace it, or choose another --out to keep both")
        if self.searched:
            return [c for c in kept_cells(doc, None) if c.key.context_tokens in self.cfg.contexts]
        return kept_cells(doc, set(self.cfg.cells()))

    def _announce(self, doc: dict, records: str) -> None:
        total = len(self.cfg.cells())
        again = len([c for c in stored_cells(doc) if not c.finished])
        if self.searched:
            kept = ", ".join(c.key.label() for c in self.kept) or "none"
            log(f"resuming the search in {self.cfg.out}: {len(self.kept)} probes already measured ({kept}), kept; "
                f"records appended to {records} (--force replaces both)")
        elif not self.remaining:
            log(f"{self.cfg.out}: all {total} cells already measured; nothing to measure (--force measures "
                "them again)")
            return
        else:
            kept = ", ".join(c.key.label() for c in self.kept) or "none"
            log(f"resuming {self.cfg.out}: {len(self.kept)} of {total} cells already measured ({kept}), kept; "
                f"measuring {len(self.remaining)}" + (f" ({again} failed or unmeasured before)" if again else "")
                + f"; records appended to {records} (--force replaces both)")
        dropped = prune_records(records, self.kept)
        if dropped:
            log(f"{records}: dropped {dropped} records of cells that are measured again")


def nothing_left(resume: Resume) -> int:
    """Every cell was measured already: show them and exit as the run that measured them would have."""
    print(table([c.to_json() for c in resume.kept]))
    log(f"results: {resume.cfg.out}")
    return 0
