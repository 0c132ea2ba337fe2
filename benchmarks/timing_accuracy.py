"""How exact are the client's clocks? loadgen's client beside the raw reader, against the paced simulator's
ground truth (`loadgen sim --truth`), at several concurrencies.

    python benchmarks/timing_accuracy.py [--concurrency 1,128,512] [--reps 3] [--speed 4] [--max-tokens 256]

The simulator runs in its own process pinned to one core (its truth stamps every chunk right after writing
it, and every request when its body arrived); this process pins itself to another. Per request and client:

- TTFT offset = client TTFT − true TTFT = (t_first_token − t_sent) − (t_first_chunk − t_arrival): what the
  client adds to TTFT (send path, network, reading, parsing). It includes the loopback trip both ways.
- chunk lag = client arrival time of content chunk i − server write time of chunk i (one CLOCK_MONOTONIC
  for both processes): how late the client sees each chunk.
- aggregate tok/s error = client Σtokens / (max t_end − min t_sent) vs the truth's Σtokens / (max t_end −
  min t_arrival), same requests.

Each (concurrency, client) runs `--waves` × concurrency requests, ≥ 16; figures are medians over `--reps`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from client_overhead import chat_body, machine, pin_self  # noqa: E402
from raw_reader import RawConnection, request_bytes  # noqa: E402

from loadgen.record import CellKey, Record  # noqa: E402
from loadgen.schedule.cell_run import CellRun  # noqa: E402
from loadgen.schedule.closed import closed_loop  # noqa: E402
from loadgen.schedule.jobs import Job  # noqa: E402
from loadgen.sim.truth import read_truth  # noqa: E402

READY = re.compile(rb"ready on (http://\S+)")
PATH = "/v1/chat/completions"


def start_sim(truth: str, speed: float, max_running: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "sim", "--port", "0", "--speed", str(speed),
                             "--max-running", str(max_running), "--truth", truth], stdout=subprocess.PIPE,
                            cwd=HERE.parent)
    m = READY.search(proc.stdout.readline())
    if not m:
        proc.kill()
        raise RuntimeError("simulator did not start")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) > 1:
        os.sched_setaffinity(proc.pid, {cpus[-1]})
    return proc, m.group(1).decode()


def body(max_tokens: int) -> dict:
    b = chat_body()
    b["max_tokens"] = max_tokens
    b.pop("model")  # the simulator's own
    return b


async def run_loadgen(url: str, c: int, n: int, tag: str, max_tokens: int) -> list[dict]:
    from loadgen.client.aiohttp_sender import ClientConfig
    from loadgen.client.h1 import Pool
    from loadgen.client.h1_sender import Sender
    pool = Pool(url)
    await pool.warm(c)
    recs: list[Record] = []
    jobs = [Job(seq=i, phase="measure", body=body(max_tokens)) for i in range(n)]
    run = CellRun(tag, CellKey(60, c), jobs, Sender(pool, ClientConfig(base_url=url, api="openai-chat")),
                  lambda: None, recs.append)
    await closed_loop(run, c)
    pool.close()
    out = []
    for r in recs:
        arrivals = [r.t_first_token_ns] + list(np.cumsum(r.chunk_gaps_ns) + r.t_first_token_ns) \
            if r.t_first_token_ns else []
        out.append({"rid": r.request_id, "ok": r.ok, "t_sent_ns": r.t_sent_ns, "t_end_ns": r.t_end_ns,
                    "t_first_token_ns": r.t_first_token_ns, "arrivals": arrivals,
                    "tokens": r.completion_tokens or 0})
    return out


async def run_raw(url: str, c: int, n: int, tag: str, max_tokens: int) -> list[dict]:
    conns = await asyncio.gather(*(RawConnection.open(url) for _ in range(c)))
    out: list[dict] = []
    counter = iter(range(n))
    b = body(max_tokens)

    async def slot(conn: RawConnection) -> None:
        for i in counter:
            rid = f"{tag}-{i}"
            res = await conn.stream(request_bytes(url, PATH, b, {"X-Request-Id": rid}))
            arrivals = [res.t_first_token_ns] + list(np.cumsum(res.gaps_ns) + res.t_first_token_ns)
            out.append({"rid": rid, "ok": True, "t_sent_ns": res.t_sent_ns, "t_end_ns": res.t_end_ns,
                        "t_first_token_ns": res.t_first_token_ns, "arrivals": arrivals,
                        "tokens": res.completion_tokens or 0})

    await asyncio.gather(*(slot(conn) for conn in conns))
    for conn in conns:
        conn.close()
    return out


def judge(results: list[dict], truth: dict[str, dict]) -> dict:
    ttft, lag = [], []
    for r in results:
        t = truth[r["rid"]]
        client_ns = r["t_first_token_ns"] - r["t_sent_ns"]
        ttft.append((client_ns - (t["t_first_chunk_ns"] - t["t_arrival_ns"])) / 1e6)
        if len(r["arrivals"]) == len(t["chunk_times_ns"]):
            lag += [(a - b) / 1e6 for a, b in zip(r["arrivals"], t["chunk_times_ns"])]
    rows = [truth[r["rid"]] for r in results]
    tokens = sum(r["tokens"] for r in results)
    client = tokens / ((max(r["t_end_ns"] for r in results) - min(r["t_sent_ns"] for r in results)) / 1e9)
    true = sum(t["completion_tokens"] for t in rows) / (
        (max(t["t_end_ns"] for t in rows) - min(t["t_arrival_ns"] for t in rows)) / 1e9)

    def dist(xs):
        a = np.asarray(xs)
        return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
                "p99": float(np.percentile(a, 99)),
                "max": float(a.max())}

    return {"ttft_offset_ms": dist(ttft), "chunk_lag_ms": dist(lag), "chunks_matched": len(lag),
            "tok_s_client": client, "tok_s_truth": true, "tok_s_error": client / true - 1,
            "requests": len(results), "failed": sum(not r["ok"] for r in results)}


def med(runs: list[dict], *path) -> float:
    vals = []
    for r in runs:
        v = r
        for p in path:
            v = v[p]
        vals.append(v)
    return statistics.median(vals)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,128,512")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--speed", type=float, default=4.0, help="simulator time compression (default 4)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--waves", type=int, default=2, help="requests per run = waves × concurrency (≥ 16)")
    p.add_argument("--json", help="write every measurement here")
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]))
    print("machine:", machine())
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    tmp = tempfile.mkdtemp(prefix="timing-")
    truth_path = os.path.join(tmp, "truth.jsonl")
    concs = [int(c) for c in a.concurrency.split(",")]
    sim, url = start_sim(truth_path, a.speed, max(concs) * 2)
    print(f"simulator {url} speed {a.speed:g}; client {pin_self(_cpu_of(sim.pid))}")
    clients = {"raw": run_raw, "loadgen": run_loadgen}
    rows = []
    try:
        for c in concs:
            n = max(16, a.waves * c)
            runs: dict[str, list[dict]] = {k: [] for k in clients}
            for rep in range(a.reps):
                for name in (("raw", "loadgen") if rep % 2 == 0 else ("loadgen", "raw")):
                    tag = f"{name}-c{c}-r{rep}-{time.monotonic_ns()}"
                    results = asyncio.run(clients[name](url, c, n, tag, a.max_tokens))
                    truth = _wait_truth(truth_path, {r["rid"] for r in results})
                    runs[name].append(judge(results, truth))
            row = {"concurrency": c, "requests": n, **{k: runs[k] for k in clients}}
            rows.append(row)
            _print(row)
    finally:
        sim.terminate()
        sim.wait(10)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"command": sys.argv, "machine": machine(),
                       "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                       "rows": rows}, fh, indent=1)
    return 0


def _cpu_of(pid: int) -> int | None:
    try:
        cpus = os.sched_getaffinity(pid)
    except (OSError, AttributeError):
        return None
    return next(iter(cpus)) if len(cpus) == 1 else None


def _wait_truth(path: str, rids: set[str], timeout_s: float = 30) -> dict[str, dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        rows = {r["rid"]: r for r in read_truth(path) if r["rid"] in rids}
        if len(rows) == len(rids) or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def _print(row: dict) -> None:
    c = row["concurrency"]
    if c == 1 or not hasattr(_print, "done"):
        _print.done = True
        print(f"{'conc':>5} {'client':<8} {'TTFT off mean':>13} {'p50':>7} {'p99':>7} {'max':>7} "
              f"{'lag mean':>9} {'p50':>7} {'p99':>7} {'max':>7} {'tok/s err':>10}   (ms; medians of reps)")
    for name in ("raw", "loadgen"):
        runs = row[name]
        t = [med(runs, "ttft_offset_ms", k) for k in ("mean", "p50", "p99", "max")]
        lag = [med(runs, "chunk_lag_ms", k) for k in ("mean", "p50", "p99", "max")]
        err = med(runs, "tok_s_error")
        print(f"{c:>5} {name:<8} {t[0]:>13.3f} {t[1]:>7.3f} {t[2]:>7.3f} {t[3]:>7.3f} "
              f"{lag[0]:>9.3f} {lag[1]:>7.3f} {lag[2]:>7.3f} {lag[3]:>7.3f} {err:>+10.4%}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
