"""`loadgen tune` on a real engine against a full sweep's verdict: llama-server (the engine tier's CPU build, or a CUDA
build: benchmarks/device_tune_llamacpp.sh) over its draft budget — no draft, `--spec-draft-n-max` 2, 4 and 8 — and,
with `--slots 1,4`, its slot count (`-np`), at concurrency 1, 2 and 4: the models and sweep file of
benchmarks/verdict_llamacpp.py with a `[tune]` table added (objective output_tok_s).

    python3 benchmarks/tune_llamacpp.py --out-dir DIR        # ~6 minutes on 2 cores, plus ~6 for a fresh sweep
    python3 benchmarks/tune_llamacpp.py --out-dir DIR --sweep-dir DIR2 --slots 1,4 \
        --n-embd 2048 --n-ff 5632 --n-head 16 -ngl 99        # on a GPU: the 8-configuration grid

Writes in DIR: tune.toml and the tune's results (tune.json, each configuration's parts). The full sweep's verdict is
`loadgen compare --format json` of --sweep-dir (results/verdict-llamacpp by default), swept first (the same file
less its `[tune]` table, sweep.toml there) when that folder holds no finished sweep.json. Prints per load both
answers side by side, whether they agree (the same winner, or a tied set that holds the other's winner or overlaps
its tied set), and both costs: restarts, cells, measured requests and wall time (the tune's visits and the sweep's
start-to-end). Both resume when run again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verdict_llamacpp as verdict  # noqa: E402  (it puts the repository on sys.path for tests.llamacpp)

TUNE_TABLE = '\n[tune]\nobjective = "output_tok_s"\n'


def sweep_file(out: Path, a: argparse.Namespace, name: str) -> str:
    """verdict_llamacpp's sweep file for the arguments' models and slot counts, named `name`."""
    shape = {"n_embd": a.n_embd, "n_ff": a.n_ff, "n_head": a.n_head, "of": a.n_layer}
    target, draft = verdict.model(a.n_layer, **shape), verdict.model(1, **shape)
    text = verdict.sweep_toml(out, target, draft, verdict.free_port(), a.requests, a.max_tokens, a.slots)
    return text.replace('name = "verdict-llamacpp"', f'name = "{name}"', 1)


def tune_toml(out: Path, a: argparse.Namespace) -> str:
    """The sweep file, renamed and with the `[tune]` table appended (after the [[configs]])."""
    return sweep_file(out, a, "tune-llamacpp") + TUNE_TABLE


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


def swept(sweep_dir: Path) -> bool:
    """Every configuration of the sweep's summary tried (none pending: an interrupted sweep resumes)."""
    path = sweep_dir / "sweep.json"
    return path.exists() and all(c["status"] != "pending" for c in json.loads(path.read_text())["configs"])


def sweep_verdict(sweep_dir: Path, a: argparse.Namespace) -> list[dict]:
    """The full sweep's output tok/s verdict; the sweep is run (or resumed) first when it has not finished."""
    if not swept(sweep_dir):
        sweep_dir.mkdir(parents=True, exist_ok=True)
        toml = sweep_dir / "sweep.toml"
        if not toml.exists():
            toml.write_text(sweep_file(sweep_dir, a, "verdict-llamacpp"))
        try:
            loadgen("sweep", str(toml), "--out-dir", str(sweep_dir))
        finally:
            stop_server(sweep_dir)
    out = subprocess.run([sys.executable, "-m", "loadgen", "compare", str(sweep_dir), "--format", "json"],
                         cwd=verdict.REPO, check=True, capture_output=True, text=True).stdout
    (sweep_dir / "compare.json").write_text(out)
    return [v for v in json.loads(out)["verdict"] if v["objective"] == "output_tok_s"]


START = time.monotonic()
DEADLINE_S: float | None = None  # --deadline-s: loadgen is interrupted (SIGINT: it saves, and resumes next time)


def loadgen(*args: str) -> int:
    """`loadgen ARGS`, interrupted as Ctrl-C would at the deadline (its results kept for the same command)."""
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", *args], cwd=verdict.REPO)
    try:
        return proc.wait(None if DEADLINE_S is None else max(1.0, DEADLINE_S - (time.monotonic() - START)))
    except subprocess.TimeoutExpired:
        print(f"deadline ({DEADLINE_S:.0f} s): interrupting loadgen {args[0]}; the same command resumes it", flush=True)
        proc.send_signal(signal.SIGINT)
        return proc.wait(60)


def stop_server(folder: Path) -> None:
    subprocess.run([sys.executable, str(verdict.RESTART), "--pidfile", str(folder / "llama-server.pid"), "--stop"],
                   check=False)


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
                   help="the full sweep's folder (swept, or resumed, first when it holds no finished sweep.json)")
    p.add_argument("--sweep-first", action="store_true", help="run (or resume) the full sweep before the tune")
    p.add_argument("--requests", type=int, default=24, help="requests per cell (default 24, the sweep's)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--slots", type=lambda v: tuple(int(x) for x in v.split(",")), default=(verdict.SLOTS,),
                   help=f"llama-server slot counts (-np), one configuration each per draft budget (default "
                   f"{verdict.SLOTS})")
    p.add_argument("--n-embd", type=int, default=verdict.N_EMBD)
    p.add_argument("--n-ff", type=int, default=verdict.N_FF)
    p.add_argument("--n-head", type=int, default=verdict.N_HEAD)
    p.add_argument("--n-layer", type=int, default=verdict.N_LAYER)
    p.add_argument("--n-gpu-layers", "-ngl", default=None, help="layers offloaded to the GPU of a GPU build")
    p.add_argument("--deadline-s", type=float, default=None, help="interrupt the sweep or the tune this many seconds "
                   "after the start (as Ctrl-C would: the same command resumes)")
    a = p.parse_args()
    global DEADLINE_S
    DEADLINE_S = a.deadline_s
    if a.n_gpu_layers is not None:
        os.environ["LLAMA_ARG_N_GPU_LAYERS"] = os.environ["LLAMA_ARG_N_GPU_LAYERS_DRAFT"] = str(a.n_gpu_layers)
    sweep_dir = a.sweep_dir.resolve()
    if a.sweep_first:
        sweep_verdict(sweep_dir, a)
        if not swept(sweep_dir):
            print("the sweep did not finish: run the same command again to resume it, then the tune")
            return 1
    out = (a.out_dir or Path(tempfile.mkdtemp(prefix="tune-llamacpp-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    toml = out / "tune.toml"
    if not toml.exists():  # a resumed tune keeps its file (and its port)
        toml.write_text(tune_toml(out, a))
    t0 = time.monotonic()
    try:
        rc = loadgen("tune", str(toml), "--out-dir", str(out))
    finally:
        stop_server(out)
    wall_s = time.monotonic() - t0
    print(f"\ntune exited {rc} after {wall_s:.0f} s")
    tune = json.loads((out / "tune.json").read_text())
    if rc >= 128 or not swept(sweep_dir):
        print("not finished: run the same command again to resume")
        return rc or 1
    answers = sweep_verdict(sweep_dir, a)
    print(f"\nthe tune ({out}) against the full sweep's verdict ({a.sweep_dir}), output tok/s:")
    disagree = side_by_side(tune, answers)
    cost = sweep_cost(sweep_dir)
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
