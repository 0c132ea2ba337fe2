"""chunks/s and driver CPU of `--ray ADDRESS --workers N` against `--workers N` on the same host.

    python3 benchmarks/ray_scale.py --workers 1,2,4 --concurrency 256 --seconds 20

Starts the burst fast SSE server (benchmarks/fast_sse_server.py, pinned to the last core) and a local Ray cluster
of max(N) nodes on 127.0.0.1 (`ray.cluster_utils.Cluster`, one CPU each), then runs the real CLI for each N both
ways on one duration-bound cell. chunks/s = output tokens / tokens per chunk / the cell's window; driver CPU is
the parent's own share of the cell's client CPU (`cpu_percent_total` − Σ the parts' `cpu_percent`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.client_overhead import start_server, stop  # noqa: E402


def one_run(url: str, n: int, concurrency: int, seconds: float, ray: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        extra = ["--ray", ray] if ray else []
        cmd = [sys.executable, "-m", "loadgen", "--url", url, "--concurrency", str(concurrency), "--contexts", "60",
               "--max-tokens", "512", "--duration-per-cell", str(seconds), "--workers", str(n), *extra,
               "--out", out, "--server-metrics", "off"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=seconds * 4 + 180, cwd=HERE.parent)
        cell = json.load(open(out))["cells"][0]
    client = cell["client"]
    parts = client.get("per_worker") or []
    total = client.get("cpu_percent_total", client.get("cpu_percent")) or 0.0
    driver = total - sum(p.get("cpu_percent") or 0.0 for p in parts) if parts else total
    chunks = cell["output_tokens"] / cell["tokens_per_chunk_mean"]
    return {"workers": n, "ray": bool(ray), "chunks_per_s": chunks / cell["duration_s"], "driver_cpu_percent": driver,
            "failed": cell["requests"]["failed"], "saturated": client.get("saturated")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--seconds", type=float, default=20.0)
    a = p.parse_args()
    counts = [int(x) for x in a.workers.split(",")]
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 78 * 2**20}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    for _ in range(max(counts) - 1):
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    server, url = start_server("--mode", "burst")
    rows = []
    try:
        for n in counts:
            for ray in (None, cluster.address):
                row = one_run(url, n, a.concurrency, a.seconds, ray)
                rows.append(row)
                print(f"{'--ray' if ray else 'local':>6}  workers {n}  chunks/s {row['chunks_per_s']:>9.0f}  driver CPU "
                      f"{row['driver_cpu_percent']:>5.1f}%  failed {row['failed']}  saturated {row['saturated']}",
                      flush=True)
    finally:
        stop(server)
        cluster.shutdown()
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
