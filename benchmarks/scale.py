"""Scale benchmarks of the real CLI against the fast SSE server (benchmarks/fast_sse_server.py): many
concurrent streams, memory over a long cell, and `--workers` scaling.

    python benchmarks/scale.py streams [--streams 10000] [--tokens 16]
    python benchmarks/scale.py memory  [--seconds 480] [--concurrency 128] [--step-ms 50] [--sample-s 60]
    python benchmarks/scale.py workers [--workers 1,2,4,8] [--client-cpus 0-7] [--server-cpus 8-15]

- `streams`: one cell of N concurrent streams (one request each) of `--tokens` tokens, paced one token per
  event: ok requests, output tokens against N × tokens, peak RSS of loadgen (parent and workers), and the
  open-file limit it ran under.
- `memory`: one duration-bound cell at concurrency C against the paced server (`--events` events of 4 tokens
  per response, one every `--step-ms` per stream: C × 1000 / step chunks/s); loadgen's RSS every
  `--sample-s`, its growth from the first minute to the end, and the cell's chunk rate. The 1-hour soak is
  `memory --seconds 3600` (a benchmark, not a test).
- `workers`: `loadgen --workers N` pinned to `--client-cpus` against the burst server in one process per
  `--server-cpus` core; chunks/s, its ratio to 1 worker, the CPU of every loadgen process, and whether
  the server's cores were the limit (their CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_overhead import machine, start_server, stop  # noqa: E402
from memory_growth import rss_kib, with_children  # noqa: E402


def cpu_list(text: str) -> list[int]:
    """'0-3,8' → [0, 1, 2, 3, 8]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent),
                                                                     os.environ.get("PYTHONPATH")])))


def loadgen_cmd(url: str, out: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "loadgen", "--url", url, "--contexts", "60", "--server-metrics", "off",
            "--out", out, *args]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its children (the workers), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in with_children(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def watch(cmd: list[str], sample_s: float, preexec=None, on_sample=None) -> tuple[int, list, str]:
    """Run `cmd`, sampling (seconds since start, RSS KiB of it and its children) every `sample_s`;
    (return code, samples, stderr's last lines)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env(), preexec_fn=preexec)
    samples = []
    t0 = time.monotonic()
    while proc.poll() is None:
        sample = (round(time.monotonic() - t0, 1), rss_kib(proc.pid))
        samples.append(sample)
        if on_sample:
            on_sample(sample)
        next_at = t0 + len(samples) * sample_s
        while proc.poll() is None and time.monotonic() < next_at:
            time.sleep(min(0.2, sample_s))
    err.seek(0)
    return proc.returncode, samples, err.read().decode(errors="replace")[-2000:]


def streams(a) -> dict:
    server, url = start_server("--mode", "paced", "--events", str(a.tokens), "--tokens-per-event", "1",
                               "--step-ms", str(a.step_ms))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            cmd = loadgen_cmd(url, out, "--concurrency", str(a.streams), "--requests-per-cell", str(a.streams),
                              "--warmup", "0", "--max-tokens", str(a.tokens), "--workers", a.workers)
            rc, samples, err = watch(cmd, 0.25)
            cell = json.load(open(out))["cells"][0] if os.path.exists(out) else {}
    finally:
        stop(server)
    ok = cell.get("requests", {}).get("ok")
    tokens = cell.get("output_tokens")
    row = {"streams": a.streams, "tokens": a.tokens, "rc": rc, "ok": ok, "output_tokens": tokens,
           "tokens_exact": tokens == a.streams * a.tokens, "peak_rss_mib": max(r for _, r in samples) / 1024,
           "wall_s": samples[-1][0] if samples else None, "limit_note": [ln for ln in err.splitlines()
                                                                          if "open files" in ln]}
    print(f"{a.streams} streams of {a.tokens} tokens: rc {rc}, ok {ok}, output tokens {tokens} "
          f"(exact: {row['tokens_exact']}), peak RSS {row['peak_rss_mib']:.1f} MiB, {row['wall_s']} s")
    if rc:
        print(err)
    return row


def memory(a) -> dict:
    server, url = start_server("--mode", "paced", "--events", str(a.events), "--step-ms", str(a.step_ms))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            cmd = loadgen_cmd(url, out, "--concurrency", str(a.concurrency), "--max-tokens", str(a.events * 4),
                              "--duration-per-cell", str(a.seconds), "--workers", a.workers)

            def show(sample):
                print(f"  {sample[0]:>7.0f} s  RSS {sample[1] / 1024:7.1f} MiB", flush=True)
            rc, samples, err = watch(cmd, a.sample_s, on_sample=show)
            cell = json.load(open(out))["cells"][0]
    finally:
        stop(server)
    chunks = cell["output_tokens"] / cell["tokens_per_chunk_mean"]
    after_minute = [(t, r) for t, r in samples if t >= 60]
    first, last = (after_minute[0], after_minute[-1]) if after_minute else (samples[0], samples[-1])
    row = {"concurrency": a.concurrency, "seconds": a.seconds, "rc": rc, "requests_ok": cell["requests"]["ok"],
           "chunks": chunks, "chunks_per_s": chunks / cell["duration_s"],
           "output_tok_s": cell["output_tok_s"], "saturated": cell["client"]["saturated"],
           "samples": samples, "growth_mib": (last[1] - first[1]) / 1024,
           "from": first, "to": last, "peak_rss_mib": max(r for _, r in samples) / 1024}
    print(f"cell: {row['requests_ok']} ok, {chunks:.0f} chunks ({row['chunks_per_s']:.0f}/s, "
          f"{row['output_tok_s']:.0f} tok/s) in {cell['duration_s']:.0f} s; client saturated: {row['saturated']}")
    print(f"RSS {first[1] / 1024:.1f} MiB at {first[0]:.0f} s → {last[1] / 1024:.1f} MiB at {last[0]:.0f} s: "
          f"growth {row['growth_mib']:+.1f} MiB; peak {row['peak_rss_mib']:.1f} MiB")
    return row


def workers(a) -> dict:
    client_cpus, server_cpus = cpu_list(a.client_cpus), cpu_list(a.server_cpus)
    server, url = start_server("--mode", "burst", "--events", str(a.events), "--procs", str(len(server_cpus)),
                               "--cpus", ",".join(map(str, server_cpus)))
    rows = []
    try:
        for n in a.workers.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "r.json")
                cmd = loadgen_cmd(url, out, "--concurrency", str(a.concurrency), "--max-tokens", str(a.events * 4),
                                  "--duration-per-cell", str(a.seconds), "--warmup", "0", "--workers", n)
                server_cpu0 = cpu_s(server.pid)
                rc, samples, err = watch(cmd, 0.5, preexec=lambda: os.sched_setaffinity(0, set(client_cpus)))
                server_cpu = cpu_s(server.pid) - server_cpu0
                cell = json.load(open(out))["cells"][0] if os.path.exists(out) else None
            if cell is None:
                print(f"workers {n}: failed (rc {rc}) {err}")
                continue
            chunks = cell["output_tokens"] / cell["tokens_per_chunk_mean"]
            client = cell["client"]
            per_worker = client.get("per_worker") or []
            worker_cpu = sum(w.get("cpu_percent") or 0 for w in per_worker)
            total_cpu = client.get("cpu_percent_total", client.get("cpu_percent")) or 0
            row = {"workers": n, "worker_processes": client.get("workers", 0),
                   "parent_cpu_percent": total_cpu - worker_cpu if per_worker else total_cpu,
                   "worker_cpu_percent": [w.get("cpu_percent") for w in per_worker], "chunks_per_s": chunks / cell["duration_s"], "failed": cell["requests"]["failed"],
                   "client_cpu_percent_total": client.get("cpu_percent_total", client.get("cpu_percent")),
                   "client_cpu_percent_max": client.get("cpu_percent"), "saturated": client["saturated"],
                   "reasons": client.get("reasons"), "server_cpu_s": server_cpu,
                   "server_cpu_percent": 100 * server_cpu / samples[-1][0] if samples else None,
                   "peak_rss_mib": max(r for _, r in samples) / 1024}
            rows.append(row)
            base = rows[0]["chunks_per_s"]
            print(f"workers {n:>4} ({row['worker_processes']} processes): {row['chunks_per_s']:>10,.0f} chunks/s "
                  f"({row['chunks_per_s'] / base:.2f}× of {rows[0]['workers']}), client CPU "
                  f"{row['client_cpu_percent_total']:.0f} % (parent {row['parent_cpu_percent']:.0f} %, busiest "
                  f"{row['client_cpu_percent_max']:.0f} %), server CPU {row['server_cpu_percent']:.0f} % of "
                  f"{len(server_cpus)} cores' wall, failed {row['failed']}, peak RSS {row['peak_rss_mib']:.0f} MiB",
                  flush=True)
    finally:
        stop(server)
    return {"rows": rows, "client_cpus": client_cpus, "server_cpus": server_cpus}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("streams")
    s.add_argument("--streams", type=int, default=10_000)
    s.add_argument("--tokens", type=int, default=16)
    s.add_argument("--step-ms", type=float, default=25.0)
    s.add_argument("--workers", default="1")
    m = sub.add_parser("memory")
    m.add_argument("--seconds", type=float, default=480.0)
    m.add_argument("--concurrency", type=int, default=128)
    m.add_argument("--events", type=int, default=128, help="content events per response (4 tokens each)")
    m.add_argument("--step-ms", type=float, default=50.0)
    m.add_argument("--sample-s", type=float, default=60.0)
    m.add_argument("--workers", default="1")
    w = sub.add_parser("workers")
    w.add_argument("--workers", default="1,2,4,8")
    w.add_argument("--client-cpus", default="0-7")
    w.add_argument("--server-cpus", default="8-15")
    w.add_argument("--concurrency", type=int, default=1024)
    w.add_argument("--events", type=int, default=512)
    w.add_argument("--seconds", type=float, default=8.0)
    for sp in (s, m, w):
        sp.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]), flush=True)
    print("machine:", machine(), flush=True)
    result = {"streams": streams, "memory": memory, "workers": workers}[a.what](a)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"command": sys.argv, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                       **result}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
