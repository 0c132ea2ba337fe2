"""`loadgen tune` on a real engine against a full sweep's verdict: llama-server (the engine tier's CPU build) over
its draft budget — no draft, `--spec-draft-n-max` 2, 4 and 8 — at concurrency 1, 2 and 4, the same models and sweep
file as benchmarks/verdict_llamacpp.py with a `[tune]` table added (objective output_tok_s).

    python3 benchmarks/tune_llamacpp.py --out-dir DIR        # ~6 minutes on 2 cores, plus ~6 for a fresh sweep

Writes in DIR: tune.toml and the tune's results (tune.json, each configuration's parts). The full sweep's verdict is
`loadgen compare --format json` of --sweep-dir (results/verdict-llamacpp by default), swept first by
verdict_llamacpp.py when that folder holds no sweep.json. Prints per load both answers side by side, whether they
agree (the same winner, or a tied set that holds the other's winner or overlaps its tied set), and both costs:
restarts, cells, measured requests and wall time (the tune's visits and the sweep's start-to-end).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verdict_llamacpp as verdict  # noqa: E402  (it puts the repository on sys.path for tests.llamacpp)

TUNE_TABLE = '\n[tune]\nobjective = "output_tok_s"\n'


def tune_toml(out: Path, requests: int, max_tokens: int) -> str:
    """verdict_llamacpp's sweep file, renamed and with the `[tune]` table appended (after the [[configs]])."""
    target, draft = verdict.model(verdict.N_LAYER), verdict.model(1)
    text = verdict.sweep_toml(out, target, draft, verdict.free_port(), requests, max_tokens)
    return text.replace('name = "verdict-llamacpp"', 'name = "tune-llamacpp"', 1) + TUNE_TABLE


def answer_set(entry: dict) -> set[str]:
    """The configurations an answer names best: its winner, its tied set, or the one alone."""
    if entry.get("winner"):
        return {entry["winner"]}
    return set(entry.get("tied") or [])


def answer_text(entry: dict) -> str:
    margin, lo_hi = entry.get("margin"), entry.get("margin_interval")
    span = f" +{100 * margin:.1f}% [{100 * lo_hi[0]:+.1f}%, {100 * lo_hi[1]:+.1f}%]" if margin is not None and lo_hi \
        else ""
    return f"{entry['decision']} {'/'.join(sorted(answer_set(entry))) or '-'}{span}"


def sweep_cost(sweep_dir: Path) -> dict:
    """Restarts, cells, requests and wall time of a sweep folder (sweep.json and each configuration's results)."""
    doc = json.loads((sweep_dir / "sweep.json").read_text())
    cells = requests = 0
    for cfg in doc["configs"]:
        for cell in json.loads((sweep_dir / cfg["results"]).read_text())["cells"]:
            cells += 1
            requests += cell["requests"]["ok"] + cell["requests"]["failed"]
    wall_s = (datetime.fromisoformat(doc["updated_at"]) - datetime.fromisoformat(doc["started_at"])).total_seconds()
    return {"restarts": sum(c.get("attempts", 1) for c in doc["configs"]), "cells": cells, "requests": requests,
            "wall_s": wall_s}


def sweep_verdict(sweep_dir: Path) -> list[dict]:
    if not (sweep_dir / "sweep.json").exists():
        subprocess.run([sys.executable, str(verdict.REPO / "benchmarks" / "verdict_llamacpp.py"), "--out-dir",
                        str(sweep_dir)], check=True)
    out = subprocess.run([sys.executable, "-m", "loadgen", "compare", str(sweep_dir), "--format", "json"],
                         cwd=verdict.REPO, check=True, capture_output=True, text=True).stdout
    return [v for v in json.loads(out)["verdict"] if v["objective"] == "output_tok_s"]


def side_by_side(tune: dict, swept: list[dict]) -> int:
    """Prints both answers per load; returns how many loads disagree."""
    by_load = {(v["context"], v["concurrency"], v["rate"]): v for v in swept}
    disagree = 0
    print(f"{'load':<10} {'tune':<48} {'sweep':<48} agree")
    for a in tune["answers"]:
        s = by_load.get((a["context"], a.get("concurrency"), a.get("rate")))
        tuned, best = answer_set(a), answer_set(s) if s else set()
        disagree += not tuned & best
        load = f"c={a.get('concurrency')}" if a.get("concurrency") is not None else f"r={a.get('rate')}"
        print(f"{load:<10} {answer_text(a):<48} {answer_text(s) if s else 'none':<48} {agreement(tuned, best)}")
    return disagree


def agreement(tuned: set[str], best: set[str]) -> str:
    """same, overlap (with what each names that the other does not) or NO."""
    if tuned == best:
        return "same"
    if not tuned & best:
        return "NO"
    only = [f"{'+'.join(sorted(x))} only in {who}" for x, who in ((tuned - best, "tune"), (best - tuned, "sweep")) if x]
    return f"overlap ({'; '.join(only)})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("--out-dir", type=Path, default=None, help="the tune's folder (default: a new temporary one); "
                   "re-running resumes it")
    p.add_argument("--sweep-dir", type=Path, default=verdict.REPO / "results" / "verdict-llamacpp",
                   help="the full sweep's folder (swept by verdict_llamacpp.py when it holds no sweep.json)")
    p.add_argument("--requests", type=int, default=24, help="requests per cell (default 24, the sweep's)")
    p.add_argument("--max-tokens", type=int, default=64)
    a = p.parse_args()
    out = (a.out_dir or Path(tempfile.mkdtemp(prefix="tune-llamacpp-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    toml = out / "tune.toml"
    toml.write_text(tune_toml(out, a.requests, a.max_tokens))
    t0 = time.monotonic()
    try:
        rc = subprocess.run([sys.executable, "-m", "loadgen", "tune", str(toml), "--out-dir", str(out)],
                            cwd=verdict.REPO, check=False).returncode
    finally:
        subprocess.run([sys.executable, str(verdict.RESTART), "--pidfile", str(out / "llama-server.pid"), "--stop"],
                       check=False)
    wall_s = time.monotonic() - t0
    print(f"\ntune exited {rc} after {wall_s:.0f} s")
    tune = json.loads((out / "tune.json").read_text())
    swept = sweep_verdict(a.sweep_dir.resolve())
    print(f"\nthe tune ({out}) against the full sweep's verdict ({a.sweep_dir}), output tok/s:")
    disagree = side_by_side(tune, swept)
    cost = sweep_cost(a.sweep_dir.resolve())
    tune_wall_s = sum(v.get("wall_s") or 0 for v in tune.get("visits", []))
    print(f"cost, tune:  {tune['restarts']} restarts, {tune['cells_measured']} cells, {tune['requests_measured']} "
          f"requests, {tune_wall_s:.0f} s of visits ({wall_s:.0f} s in all), gpu_minutes {tune['gpu_minutes']:.2f}")
    print(f"cost, sweep: {cost['restarts']} restarts, {cost['cells']} cells, {cost['requests']} requests, "
          f"{cost['wall_s']:.0f} s; the tune's own grid estimate: {tune['grid']}")
    print(f"tune measured {100 * tune['requests_measured'] / cost['requests']:.0f}% of the sweep's requests; "
          f"{'the answers overlap at every load' if not disagree else f'{disagree} load(s) share no configuration'}")
    return rc or (1 if disagree else 0)


if __name__ == "__main__":
    sys.exit(main())
