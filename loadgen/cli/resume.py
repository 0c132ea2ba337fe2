"""Never lose a run: an existing `--out` is resumed, replaced only with `--force`, refused when it was measured
under other settings.

The same command again keeps the finished cells (usable by `results.cell_status`, and not stopped early by
an interrupt), measures the rest, says so, and appends to the records (JSONL) instead of truncating them. A file measured with another
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
from loadgen.results.cell_status import usable
from loadgen.results.document import ResultsFile, cell_key
from loadgen.results.table import table
from loadgen.sinks.jsonl import JsonlSink, requests_path

# settings that change how a run is driven or reported, not what a finished cell measured
NOT_COMPARED = frozenset({
    "out", "force", "wait_ready_s", "max_failed_fraction", "drain_timeout_s", "on_server_down",
    "server_down_after", "server_wait_timeout_s", "cell_attempts", "run_id", "start_at", "cell_period_s",
    "metrics_port", "metrics_host", "metrics_linger_s", "timeout_s", "idle_timeout_s", "api_key_env",
    "api_key_file", "telemetry_interval_s", "workers", "http_client",
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


def _label(cell: dict) -> str:
    rate = cell.get("request_rate")
    return f"ctx={cell['context_tokens']} " + (f"c={cell['concurrency']}" if rate is None else f"rate={rate:g}/s")


def finished(cell: dict) -> bool:
    """Kept on resume: usable, and not stopped early (an interrupt left some of its requests unsent)."""
    return usable(cell) and not cell.get("requests_not_sent")


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


class Resume:
    """What `--out` holds and what this run does with it: `results` (with the kept cells), `sink` (the JSONL,
    appended when resuming), `remaining` (cells to measure)."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        doc = None if cfg.force else load_doc(cfg.out)
        self.kept = self._kept(doc) if doc else []
        keys = {cell_key(c) for c in self.kept}
        self.remaining = [c for c in cfg.cells() if cell_key(c.as_dict()) not in keys]
        records = requests_path(cfg.out)
        self.sink = JsonlSink(records, append=doc is not None, label=cfg.label)
        sections = {"earlier_runs": earlier_runs(doc)} if doc else {}
        target = doc.get("target") if doc and self.kept else None
        self.results = ResultsFile(cfg.out, kept=self.kept, sections=sections, earlier_target=target)
        if doc is not None:
            self._announce(doc, records)

    def _kept(self, doc: dict) -> list[dict]:
        cells = [c for c in doc.get("cells", []) if isinstance(c, dict)]
        diff = args_diff(doc.get("args") or {}, self.cfg.public_args()) if cells else []
        if diff:
            raise UsageError(f"{self.cfg.out} holds a run measured with other settings ({'; '.join(diff)}); "
                             "pass --force to replace it, or choose another --out to keep both")
        wanted = {cell_key(c.as_dict()) for c in self.cfg.cells()}
        return [c for c in cells if finished(c) and cell_key(c) in wanted]

    def _announce(self, doc: dict, records: str) -> None:
        total = len(self.cfg.cells())
        again = len([c for c in doc.get("cells", []) if isinstance(c, dict) and not finished(c)])
        if not self.remaining:
            log(f"{self.cfg.out}: all {total} cells already measured; nothing to measure (--force measures "
                "them again)")
            return
        kept = ", ".join(_label(c) for c in self.kept) or "none"
        log(f"resuming {self.cfg.out}: {len(self.kept)} of {total} cells already measured ({kept}), kept; "
            f"measuring {len(self.remaining)}" + (f" ({again} failed or unmeasured before)" if again else "")
            + f"; records appended to {records} (--force replaces both)")
        repair_torn_tail(records)


def repair_torn_tail(path: str) -> None:
    """End a record torn by a killed run with a newline, so the first appended record is a line of its own
    (readers skip the torn one)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            fh.write(b"\n")


def nothing_left(resume: Resume) -> int:
    """Every cell was measured already: show them and exit as the run that measured them would have."""
    print(table(resume.kept))
    log(f"results: {resume.cfg.out}")
    return 0
