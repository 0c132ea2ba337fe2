"""Real-GPU check of the GPU activity figures: NVML (NvmlSource, and DcgmSource through the NVML exporter) side
by side with `nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw,clocks_event_reasons.active`, for
three loads on GPU 0, each measured over one window like a cell:

    python3 benchmarks/h200_gpu_activity.py [--seconds 12] [--interval 0.25] [--port 9400]

- idle: nothing runs.
- matmul: bf16 8192³ matrix products back to back (torch).
- host_bound: a burst of small matrix products, then a host sleep, so the GPU is busy about 17 % of the time;
  the load process times its own kernels with CUDA events (its busy fraction = Σ kernel time / wall time,
  the ground truth for utilization).
Per load: the time-weighted figures of `loadgen.metrics.gpu_window.cell_activity` over the window, the
bottleneck verdict (`loadgen.metrics.bottleneck`, one request in flight), and nvidia-smi's readings (every
200 ms) averaged over the same window, with the reasons it showed. JSON to $OUT/h200_gpu_activity.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.h200_nvml_check import start_exporter  # noqa: E402  (after the sys.path insert)
from loadgen.metrics.bottleneck import bottleneck  # noqa: E402
from loadgen.metrics.gpu_window import cell_activity  # noqa: E402
from loadgen.telemetry.dcgm import DcgmSource  # noqa: E402
from loadgen.telemetry.nvml import NvmlSource, nvml_available  # noqa: E402

LOAD = r"""
import sys, time, torch
kind, secs = sys.argv[1], float(sys.argv[2])
n = 8192 if kind == "matmul" else 2048
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(5): a @ b
torch.cuda.synchronize(); print("ready torch", torch.__version__, flush=True)
busy_s, k, t0 = 0.0, 0, time.perf_counter()
while time.perf_counter() - t0 < secs:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20 if kind == "matmul" else 40): a @ b
    end.record(); end.synchronize(); k += 1
    busy_s += start.elapsed_time(end) / 1e3
    if kind == "host_bound":
        time.sleep(start.elapsed_time(end) / 1e3 * 83 / 17)  # host work: 83 % of each step
wall = time.perf_counter() - t0
print(f"done {k} steps in {wall:.1f} s, GPU busy {busy_s / wall:.3f} of the time (CUDA events)", flush=True)
"""
SMI_FIELDS = "utilization.gpu,clocks.sm,power.draw,clocks_event_reasons.active"


def start_smi() -> subprocess.Popen:
    return subprocess.Popen(["nvidia-smi", "-i", "0", f"--query-gpu=timestamp,{SMI_FIELDS}",
                             "--format=csv,noheader,nounits", "-lms", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def smi_summary(lines: list[str]) -> dict:
    rows = [[c.strip() for c in line.split(",")] for line in lines if line.count(",") >= 4]
    parsed = []
    for r in rows:
        try:
            parsed.append((float(r[1]), float(r[2]), float(r[3]), r[4]))
        except ValueError:
            continue
    if not parsed:
        return {"raw": lines[:5]}
    reasons: dict[str, int] = {}
    for p in parsed:
        reasons[p[3]] = reasons.get(p[3], 0) + 1
    return {"readings": len(parsed), "utilization_percent": sum(p[0] for p in parsed) / len(parsed),
            "sm_clock_mhz": sum(p[1] for p in parsed) / len(parsed),
            "power_w": sum(p[2] for p in parsed) / len(parsed),
            "reasons": {k: v / len(parsed) for k, v in reasons.items()}}


async def measure(seconds: float, interval_s: float, url: str) -> dict:
    sources = [NvmlSource(interval_s), DcgmSource([url], interval_s)]
    for s in sources:
        await s.start()
    t0 = time.monotonic_ns()
    await asyncio.sleep(seconds)
    t1 = time.monotonic_ns()
    out = {}
    for s in sources:
        res = await s.stop()
        if not res.available:
            out[s.name] = {"available": False, "reason": res.reason}
            continue
        activity = cell_activity(s.name, res.values["activity_gpus"], {"start_ns": t0, "end_ns": t1},
                                 res.values["activity_missing"])
        limit = res.values["per_gpu"][0]["limit_w"]
        verdict, evidence = bottleneck(None, activity, 1.0, limit)
        out[s.name] = {"available": True, "mean_w": res.values["per_gpu"][0]["mean_w"], "limit_w": limit,
                       "gpu0": activity["per_gpu"][0], "unavailable": activity["unavailable"],
                       "bottleneck": str(verdict), "evidence": evidence, "warnings": res.warnings}
    return out


def phase(kind: str, a: argparse.Namespace, url: str) -> dict:
    load = None
    if kind != "idle":
        load = subprocess.Popen([sys.executable, "-c", LOAD, kind, str(a.seconds + 4)], stdout=subprocess.PIPE,
                                text=True)
        print(kind, load.stdout.readline().strip(), flush=True)
        time.sleep(1.5)  # clocks and power settle under the loop
    smi = start_smi()
    result = asyncio.run(measure(a.seconds, a.interval, url))
    smi.terminate()
    result["nvidia_smi"] = smi_summary(smi.communicate(timeout=10)[0].splitlines())
    if load is not None:
        result["load_process"] = load.communicate(timeout=60)[0].strip()
    return result


def line(kind: str, name: str, r: dict) -> str:
    if not r.get("available", True):
        return f"{kind:10} {name:10} unavailable: {r.get('reason')}"
    g = r["gpu0"]
    reasons = " ".join(f"{k}={g.get(k + '_fraction', float('nan')):.2f}" for k in ("power_cap", "thermal", "hw_slowdown"))
    return (f"{kind:10} {name:10} util {g.get('utilization_percent', float('nan')):5.1f} %  SM "
            f"{g.get('sm_clock_mhz', float('nan')):6.0f} MHz ({g.get('sm_clock_fraction', float('nan')):.2f} of max)  "
            f"{r['mean_w']:6.1f} W  {reasons}  power-violation {g.get('power_violation_fraction', float('nan')):.2f}  "
            f"mem {g.get('memory_used_mib', float('nan')):.0f} MiB  -> {r['bottleneck']}: {r['evidence']}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--port", type=int, default=9400)
    a = p.parse_args()
    ok, reason = nvml_available()
    print(reason, flush=True)
    if not ok:
        return 2
    exporter = start_exporter(a.port, a.interval)
    report: dict = {"nvml": reason, "smi_version": subprocess.run(["nvidia-smi", "--version"], capture_output=True,
                                                                  text=True).stdout}
    try:
        for kind in ("idle", "matmul", "host_bound"):
            report[kind] = phase(kind, a, f"http://127.0.0.1:{a.port}/metrics")
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)
    for kind in ("idle", "matmul", "host_bound"):
        r = report[kind]
        for name in ("nvml", "dcgm"):
            print(line(kind, name, r[name]))
        print(f"{kind:10} nvidia-smi {json.dumps(r['nvidia_smi'])}")
        if "load_process" in r:
            print(f"{kind:10} load       {r['load_process']}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "h200_gpu_activity.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
