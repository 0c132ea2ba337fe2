"""Does a long cell's memory stay bounded? RSS of a real `loadgen` run (parent + workers) sampled over a
duration-bound cell against the paced fast server, with the growth per hour extrapolated.

    python benchmarks/memory_growth.py [--seconds 60] [--concurrency 128] [--workers 1] [--events 128]

(the 8-minute cell of docs/performance.md, ~170 requests/s: `--seconds 480 --events 30`). Reported: RSS from
minute 1 to the end of the load, and what the summary after the load adds (sampled every 50 ms).

What still grows: ~50 bytes per measured request, measured (the kept records' flags and spec columns, their
integer rows being in a temporary file, `loadgen/run/record_columns.py`, and 16 bytes of the spill index); the
chunks are folded and moved to disk as requests end (docs/definitions.md, *Bounded memory in long cells*), and
connections, buffers, exporter series and loop-lag samples (capped at 200k) are bounded. `benchmarks/scale.py
memory` samples RSS every minute of a long cell.
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


def with_children(pid: int) -> list[int]:
    """`pid` and its children (the workers), from /proc."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    return pids


def rss_kib(pid: int) -> int:
    """RSS of `pid` and its children (the workers), KiB."""
    total = 0
    for p in with_children(pid):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--concurrency", type=int, default=128)
    p.add_argument("--workers", default="1")
    p.add_argument("--events", type=int, default=128, help="content events per response (4 tokens each)")
    p.add_argument("--step-ms", type=float, default=25.0)
    p.add_argument("--json", help="write the samples here")
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]))
    print("machine:", machine())
    server, url = start_server("--mode", "paced", "--events", str(a.events), "--step-ms", str(a.step_ms))
    tmp = tempfile.mkdtemp(prefix="mem-")
    out = os.path.join(tmp, "r.json")
    cmd = [sys.executable, "-m", "loadgen", "--url", url, "--concurrency", str(a.concurrency),
           "--contexts", "60",
           "--max-tokens", str(a.events * 4), "--duration-per-cell", str(a.seconds), "--workers", a.workers,
           "--server-metrics", "off", "--out", out]
    samples = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                    filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))))
        t0 = time.monotonic()
        while proc.poll() is None:
            samples.append((time.monotonic() - t0, rss_kib(proc.pid)))
            time.sleep(1.0 if time.monotonic() - t0 < a.seconds else 0.05)  # the summary: sampled finely
    finally:
        stop(server)
    cell = json.load(open(out))["cells"][0]
    chunks = cell["output_tokens"] / cell["tokens_per_chunk_mean"]
    # the load runs from the first sample after start-up to the end of the cell; growth = slope over it
    load = [(t, r) for t, r in samples if 5.0 <= t <= a.seconds]
    (t1, r1), (t2, r2) = load[0], load[-1]
    slope_kib_s = (r2 - r1) / (t2 - t1)
    per_chunk = slope_kib_s * 1024 * cell["duration_s"] / chunks
    rate = chunks / cell["duration_s"]
    rate_req = cell["requests"]["ok"] / cell["duration_s"]
    print(f"cell: {cell['requests']['ok']} requests, {chunks:.0f} chunks ({rate:.0f}/s) "
          f"in {cell['duration_s']:.1f} s; client saturated: {cell['client']['saturated']}")
    print(f"RSS: {samples[1][1] / 1024:.1f} MiB at start-up, {r1 / 1024:.1f} MiB at {t1:.0f} s, "
          f"{r2 / 1024:.1f} MiB at {t2:.0f} s, peak {max(r for _, r in samples) / 1024:.1f} MiB")
    minute = [(t, r) for t, r in load if t >= 60.0] or load
    during = max(r for t, r in samples if t <= a.seconds)
    after = [r for t, r in samples if t > a.seconds]
    summary_mib = (max(after) - load[-1][1]) / 1024 if after else None
    print(f"minute 1 to the end of the load: {minute[0][1] / 1024:.1f} MiB at {minute[0][0]:.0f} s -> "
          f"{minute[-1][1] / 1024:.1f} MiB at {minute[-1][0]:.0f} s (growth "
          f"{(minute[-1][1] - minute[0][1]) / 1024:.1f} MiB, "
          f"{(minute[-1][1] - minute[0][1]) * 1024 / max(1.0, rate_req * (minute[-1][0] - minute[0][0])):.0f} "
          f"bytes a request); peak during the load {during / 1024:.1f} MiB; the summary after it added "
          f"{'-' if summary_mib is None else f'{summary_mib:.1f}'} MiB (its peak over the last load sample)")
    print(f"growth: {slope_kib_s * 3600 / 1024:.0f} MiB per hour at this rate; "
          f"{per_chunk:.1f} bytes per chunk "
          f"({per_chunk * 1e6 / 2**20:.1f} MiB per million chunks)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"command": sys.argv, "samples": samples, "chunks": chunks, "requests_per_s": rate_req,
                       "summary_mib": summary_mib,
                       "bytes_per_chunk": per_chunk,
                       "mib_per_hour": slope_kib_s * 3600 / 1024}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
