"""Whole-process CPU per chunk: a real `loadgen` run beside the raw reader, start-up removed by difference.

    python benchmarks/whole_run.py [--concurrency 32] [--requests 128,640] [--reps 9] [--json OUT]

Each client is a fresh process that runs N requests at concurrency C against the burst fast server (pinned to
one core; the client to another) and exits: `loadgen` (the CLI: discovery, warmup, the load, the summary, the
results and JSONL written) and the raw reader (`raw_reader.py`: the load only). CPU is the child's user+system
time (`RUSAGE_CHILDREN`); chunks are the content chunks received. Start-up (imports, discovery, the pool) costs
the same at both N, so it cancels in

    CPU per chunk = (CPU(N2) − CPU(N1)) / (chunks(N2) − chunks(N1))

which is what each extra request costs the whole process: the load and everything after it (records kept,
the summary's per-request work, the JSONL). Medians over `--reps`; the ratio is loadgen / raw of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_overhead import PATH, chat_body, machine, start_server, stop  # noqa: E402
from raw_reader import RawConnection, request_bytes  # noqa: E402


async def raw_run(url: str, n: int, c: int) -> int:
    """N requests over C keep-alive connections (a closed loop); the content chunks received."""
    request = request_bytes(url, PATH, chat_body())
    conns = await asyncio.gather(*(RawConnection.open(url) for _ in range(c)))
    left = [n]
    chunks = [0]

    async def slot(conn: RawConnection) -> None:
        while left[0] > 0:
            left[0] -= 1
            res = await conn.stream(request)  # awaited first: `+=` would read the total before the await
            chunks[0] += res.chunks

    await asyncio.gather(*(slot(conn) for conn in conns))
    for conn in conns:
        conn.close()
    return chunks[0]


def child_cpu(cmd: list[str], cpu: int | None) -> float:
    """Run `cmd` (pinned to `cpu`) to its end; its user+system seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, preexec_fn=preexec,
                   env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def loadgen_once(url: str, n: int, c: int, cpu: int | None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="whole-") as tmp:
        out = os.path.join(tmp, "r.json")
        cpu_s = child_cpu([sys.executable, "-m", "loadgen", "--url", url, "--concurrency", str(c),
                           "--requests-per-cell", str(n), "--contexts", "60", "--max-tokens", "512",
                           "--server-metrics", "off", "--out", out], cpu)
        with open(out.replace(".json", ".requests.jsonl"), "rb") as fh:
            chunks = sum(json.loads(line)["chunks"] for line in fh)
    return cpu_s, chunks


def raw_once(url: str, n: int, c: int, cpu: int | None) -> tuple[float, int]:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as fh:
        cpu_s = child_cpu([sys.executable, __file__, "--raw-process", url, str(n), str(c), fh.name], cpu)
        return cpu_s, json.load(open(fh.name))["chunks"]


def per_chunk_us(runs: dict[int, list[tuple[float, int]]]) -> float:
    (n1, r1), (n2, r2) = sorted(runs.items())
    cpu = statistics.median(c for c, _ in r2) - statistics.median(c for c, _ in r1)
    chunks = statistics.median(k for _, k in r2) - statistics.median(k for _, k in r1)
    return 1e6 * cpu / chunks


def per_rep_us(runs: dict[int, list[tuple[float, int]]]) -> list[float]:
    """The same difference within each repetition: its spread says how far the start-up's noise carries."""
    (n1, r1), (n2, r2) = sorted(runs.items())
    return [1e6 * (c2 - c1) / (k2 - k1) for (c1, k1), (c2, k2) in zip(r1, r2)]


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--raw-process":
        url, n, c, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        with open(out, "w") as fh:
            json.dump({"chunks": asyncio.run(raw_run(url, n, c))}, fh)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--requests", default="128,640")
    p.add_argument("--reps", type=int, default=9, help="a fresh process's start-up varies by ±0.4 s: take many")
    p.add_argument("--json")
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]))
    print("machine:", machine(), "load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    server, url = start_server("--mode", "burst")
    cores = sorted(os.sched_getaffinity(0))
    client_cpu = cores[0] if len(cores) > 1 else None
    sizes = [int(x) for x in a.requests.split(",")]
    runs = {name: {n: [] for n in sizes} for name in ("raw", "loadgen")}
    try:
        for rep in range(a.reps):
            for n in sizes:
                for name, once in (("raw", raw_once), ("loadgen", loadgen_once))[::1 if rep % 2 == 0 else -1]:
                    runs[name][n].append(once(url, n, a.concurrency, client_cpu))
                    cpu_s, chunks = runs[name][n][-1]
                    print(f"rep {rep} {name:>7} N={n:<5} CPU {cpu_s:.3f} s, {chunks} chunks", flush=True)
    finally:
        stop(server)
    raw, lg = per_chunk_us(runs["raw"]), per_chunk_us(runs["loadgen"])
    ratios = sorted(g / r for g, r in zip(per_rep_us(runs["loadgen"]), per_rep_us(runs["raw"])))
    print(f"whole run at c={a.concurrency}, N {sizes[0]}→{sizes[1]}: raw {raw:.2f} µs/chunk, loadgen {lg:.2f} "
          f"µs/chunk, ratio {lg / raw:.2f}× (within a repetition: {ratios[0]:.2f}–{ratios[-1]:.2f}×); "
          f"load average after: {os.getloadavg()[0]:.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"command": sys.argv, "runs": runs, "raw_us_per_chunk": raw, "loadgen_us_per_chunk": lg,
                       "ratio": lg / raw}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
