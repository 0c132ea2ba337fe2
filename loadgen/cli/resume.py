"""Never lose a run: an existing `--out` is resumed, replaced only with `--force`, refused when it was measured
under other settings.

The same command again keeps the finished cells (`results.stored`: the one rule plain runs and sweeps share —
judged ok, and not stopped early by an interrupt), measures the rest, says so, and appends to the records
(JSONL), keeping only the lines of the kept cells. A file measured with another
matrix, request options or target is refused (exit 2) with the differences, naming `--force` (replace it)
and `--out` (keep both). The target is checked twice: its URL and options here, its fingerprint (the server's
configuration) once discovery has seen it (`ResultsFile.begin`), still before any load.

Without `--out` (nor `--label`) the same command resumes too: the newest auto-named file of the results folder
that an interrupt (or a kill) left unfinished, measured with the same settings against the same target (the
same URL and options; the built-in simulator of the same settings), is resumed, and the console names it;
`--out` or `--force` starts a new file instead. An interrupt prints the exact command that resumes its file
(`resume_command`).

Records: the JSONL keeps the records of the kept cells and the new cells' records are appended; the records of
a cell measured again (stopped early, failed, or never ended) are dropped, so a cell's records are always
those of the measurement in the results. The console says how many were dropped.
"""

from __future__ import annotations

import glob
import os
import sys

from loadgen.config import RunConfig
from loadgen.console import WIDTH, log
from loadgen.errors import UsageError
from loadgen.files import read_json
from loadgen.report.table import table
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile, host_identity, requests_path
from loadgen.results.incidents import IncidentKind
from loadgen.results.stored import kept_cells, prune_records, stored_cells
from loadgen.sinks.jsonl import JsonlSink

# settings that change how a run is driven or reported, not what a finished cell measured
NOT_COMPARED = frozenset({
    "out", "out_auto", "force", "wait_ready_s", "wait_refused_s", "max_failed_fraction", "drain_timeout_s",
    "on_server_down", "server_down_after", "server_wait_timeout_s", "cell_attempts", "run_id", "start_at",
    "cell_period_s", "metrics_port", "metrics_host", "metrics_linger_s", "timeout_s", "idle_timeout_s",
    "api_key_env", "api_key_file", "telemetry_interval_s", "workers", "http_client", "wide", "drift_check",
})
AUTO_NAME = "loadgen-*.json"  # the auto-named results files (run_config.out_path)


def args_diff(old: dict, new: dict) -> list[str]:
    """'max_tokens: 256 → 512' for each compared setting stored in both that differs (a setting the older
    file does not know is not a difference)."""
    keys = sorted((set(old) & set(new)) - NOT_COMPARED)
    return [f"{k}: {_show(k, old[k])} → {_show(k, new[k])}" for k in keys if _norm(old[k]) != _norm(new[k])]


def _norm(value):
    return list(value) if isinstance(value, tuple) else value


def _show(key: str, value) -> str:
    if value is None:  # not given: for --url, the built-in simulator was measured
        return "the built-in simulator" if key == "url" else "not given"
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def other_settings(out: str | None, diff: list[str]) -> UsageError:
    """The one line refusing an `--out` measured with other settings: the differences in it where they fit
    120 columns, else named on the lines above it."""
    fix = "; --force replaces it, another --out keeps both"
    said = f"{out} was measured with other settings ({'; '.join(diff)}){fix}"
    if len(f"loadgen: error: {said}") <= WIDTH:
        return UsageError(said)
    for d in diff:
        log(f"{out}: {d}")
    return UsageError(f"{out} was measured with other settings (named above){fix}")


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


def same_settings(doc: dict, cfg: RunConfig, searched: bool) -> list[str]:
    """The compared settings in which `doc` differs from this run (`args_diff`; a search's loads aside)."""
    diff = args_diff(doc.get("args") or {}, cfg.public_args())
    return [d for d in diff if not (searched and d.split(":")[0] in SEARCHED)]


def interrupted(doc: dict, cfg: RunConfig, searched: bool) -> bool:
    """The run that wrote `doc` stopped before its end: a cell stopped early or not reached by an interrupt, or
    (a matrix) a cell not stored at all (killed, or interrupted before its first cell ended)."""
    stored = stored_cells(doc)
    if not searched and not set(cfg.cells()) <= {c.key for c in stored}:
        return True
    return any(i.kind in (IncidentKind.INTERRUPTED, IncidentKind.INTERRUPTED_BEFORE) for c in stored for i in c.incidents)


def find_interrupted(cfg: RunConfig, searched: bool = False) -> str | None:
    """The newest auto-named results file beside `cfg.out` left unfinished by an interrupt and measured with the
    same settings against the same target (module docstring); None when there is none."""
    assert cfg.out is not None  # named by config_from_args
    for path in sorted(glob.glob(os.path.join(os.path.dirname(cfg.out), AUTO_NAME)), key=os.path.getmtime,
                       reverse=True):
        try:
            doc = read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("args") and not same_settings(doc, cfg, searched) \
                and interrupted(doc, cfg, searched) and not still_running(doc):
            return path
    return None


def still_running(doc: dict) -> bool:
    """The process that writes `doc` is alive on this machine (same host and boot): a run in progress, not an
    interrupted one."""
    host = doc.get("host") or {}
    if host.get("boot_id") != host_identity().get("boot_id") or not isinstance(host.get("pid"), int):
        return False
    try:
        os.kill(host["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return host["pid"] != os.getpid()


class Resume:
    """What `--out` holds and what this run does with it: `results` (with the kept cells), `sink` (the JSONL,
    appended when resuming), `remaining` (cells to measure). A search (`searched`) keeps finished cells of any
    load of its prompt lengths: they are its earlier probes."""

    def __init__(self, cfg: RunConfig, searched: bool = False):
        self.cfg = cfg
        self.searched = searched
        found = find_interrupted(cfg, searched) if cfg.out_auto and not cfg.force else None
        if found:
            log(f"{found} is an interrupted run of the same settings and target: resuming it (--out FILE "
                "or --force starts a new file)")
            cfg.out = found
        assert cfg.out is not None  # named by config_from_args
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
        diff = same_settings(doc, self.cfg, self.searched) if stored_cells(doc) else []
        if diff:
            raise other_settings(self.cfg.out, diff)
        if self.searched:
            return [c for c in kept_cells(doc, None) if c.key.context_tokens in self.cfg.contexts]
        return kept_cells(doc, set(self.cfg.cells()))

    def _announce(self, doc: dict, records: str) -> None:
        total = len(self.cfg.cells())
        again = len([c for c in stored_cells(doc) if not c.finished])
        kept = ", ".join(c.key.label() for c in self.kept) or "none"
        if self.searched:
            log(f"resuming the search in {self.cfg.out}: {len(self.kept)} probes already measured ({kept}), kept")
        elif not self.remaining:
            log(f"{self.cfg.out}: all {total} cells already measured; nothing to measure (--force "
                "measures them again)")
            return
        else:
            log(f"resuming {self.cfg.out}: {len(self.kept)} of {total} cells already measured"
                + (f" ({kept}), kept" if self.kept else "") + f"; measuring {len(self.remaining)}"
                + (f" ({again} failed or unmeasured before)" if again else ""))
        dropped = prune_records(records, self.kept)
        log(f"{records}: the kept cells' records stay, the new ones are appended"
            + (f"; dropped {dropped} records of cells that are measured again" if dropped else "")
            + " (--force replaces both files)")




def program() -> list[str]:
    """How this loadgen was started: the `loadgen` script as typed, else this interpreter's `-m loadgen`."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name == "loadgen":
        return [sys.argv[0]]
    return [sys.executable, "-m", "loadgen"] if name == "__main__.py" else ["loadgen"]


def resume_command(argv: list[str], cfg: RunConfig) -> list[str]:
    """The exact command that resumes this run's results: `argv` again without `--force` (which would replace
    them), naming `--out` when it was chosen automatically."""
    args = [a for a in argv if a != "--force"]
    if cfg.out is not None and not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", cfg.out]
    return program() + args



def nothing_left(resume: Resume) -> int:
    """Every cell was measured already: show them and exit as the run that measured them would have."""
    print(table(resume.kept))
    log(f"results: {resume.cfg.out}")
    return 0
