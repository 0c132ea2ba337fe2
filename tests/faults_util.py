"""Helpers of the fault tests: read a run's outputs and check that every request is accounted for."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

from loadgen.files import read_json, read_jsonl

MEASURE = "measure"


def outputs(out: Path) -> tuple[dict, list[dict]]:
    """(results document, records) of a run whose --out was `out`."""
    return read_json(str(out)), read_jsonl(records_path(out))


def records_path(out: Path) -> str:
    return str(out)[: -len(".json")] + ".requests.jsonl"


def jsonl_lines(out: Path) -> list[bytes]:
    """The records file's lines; a run rejected before any load creates no records file."""
    if not os.path.exists(records_path(out)):
        return []
    with open(records_path(out), "rb") as fh:
        return fh.read().splitlines()


def assert_accounted(doc: dict, records: list[dict], planned: int) -> None:
    """Exactly one record per sent request; per measured cell, records + not sent = planned, and the cell's
    request counts are the records' outcomes."""
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    for cell in doc["cells"]:
        if cell["status"] == "skipped":
            assert not [r for r in records if _key(r) == _cell_key(cell)]
            continue
        attempt = cell.get("attempt", 0)
        mine = [r for r in records if _key(r) == _cell_key(cell) and r["phase"] == MEASURE
                and r.get("attempt", 0) == attempt]
        req = cell["requests"]
        assert req["ok"] + req["failed"] + req.get("cancelled", 0) == len(mine)
        assert req["by_outcome"] == dict(Counter(r["outcome"] for r in mine))
        assert len(mine) + cell["requests_not_sent"] == planned, (len(mine), cell["requests_not_sent"])


def verdict(cell: dict) -> tuple:
    """A cell's key, status, error and incidents: what a test of a failed or skipped cell checks."""
    return cell["context_tokens"], cell["concurrency"], cell["status"], cell["error"], cell["incidents"]


def _key(rec: dict) -> tuple:
    return rec["cell"]["context_tokens"], rec["cell"]["concurrency"]


def _cell_key(cell: dict) -> tuple:
    return cell["context_tokens"], cell["concurrency"]


def wait_truth(sim, predicate, timeout_s: float = 5.0) -> dict[str, dict]:
    """The simulator's truth rows by request id, once `predicate(rows)` holds (rows of requests the client
    gave up on are written when the simulator notices the disconnect)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = read_jsonl(str(sim.truth)) if Path(sim.truth).exists() else []  # a torn last line is skipped
        if predicate(rows) or time.monotonic() > deadline:
            return {r["rid"]: r for r in rows}
        time.sleep(0.05)


def streamed(truth: dict[str, dict]) -> dict[str, dict]:
    """Truth rows of the measured (streamed) requests: the sizing probes are not streamed, and the readiness
    gate's 1-token generations (--wait-ready) carry request ids `readiness-…`."""
    return {rid: r for rid, r in truth.items() if r["stream"] and not rid.startswith("readiness-")}
