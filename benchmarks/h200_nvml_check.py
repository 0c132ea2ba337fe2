"""Real-GPU check of the NVML path: the NVML exporter, NvmlSource and DcgmSource on an idle and a loaded GPU.

    python3 benchmarks/h200_nvml_check.py [--idle 10] [--load 15] [--interval 0.25] [--port 9400]

1. `nvml_available()`; start `python -m exporters.nvml` on 127.0.0.1:PORT and scrape it once.
2. Idle phase: NvmlSource and DcgmSource (scraping that exporter) side by side for `--idle` seconds.
3. Load phase: a bf16 matrix-product loop on GPU 0 in a child process (torch, else cupy); once it is
   warm, both sources again for `--load` seconds.
4. Prints, per phase and GPU: mean/max W, energy from NVML's counter vs the trapezoid integral of power,
   the power limit; writes the same as JSON to $OUT/h200_nvml_check.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.telemetry.dcgm import DcgmSource  # noqa: E402  (after the sys.path insert)
from loadgen.telemetry.dcgm_format import parse_dcgm  # noqa: E402
from loadgen.telemetry.nvml import NvmlSource, nvml_available  # noqa: E402

LOAD = r"""
import sys, time
secs = float(sys.argv[1]); n = 8192
try:
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
    sync, mm, lib = torch.cuda.synchronize, (lambda: a @ b), "torch " + torch.__version__
except ImportError:
    import cupy
    a = cupy.random.rand(n, n, dtype=cupy.float32).astype(cupy.float16); b = a.copy()
    sync, mm, lib = cupy.cuda.Device().synchronize, (lambda: a @ b), "cupy " + cupy.__version__
for _ in range(5): mm()
sync(); print("ready", lib, flush=True)
t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < secs:
    for _ in range(20): mm()
    sync(); k += 20
dt = time.perf_counter() - t0
print(f"done {k} products in {dt:.1f} s: {2 * n**3 * k / dt / 1e12:.0f} TFLOP/s", flush=True)
"""


def start_exporter(port: int, interval_s: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "exporters.nvml", "--port", str(port), "--interval",
                             str(interval_s)], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"exporter exited {proc.returncode}: {proc.stderr.read()}") from None
            time.sleep(0.1)
    raise SystemExit("exporter did not come up in 10 s")


async def measure(seconds: float, interval_s: float, url: str) -> dict:
    sources = [NvmlSource(interval_s), DcgmSource([url], interval_s)]
    for s in sources:
        await s.start()
    await asyncio.sleep(seconds)
    out = {}
    for s in sources:
        res = await s.stop()
        out[s.name] = {"available": res.available, "reason": res.reason, "warnings": res.warnings,
                       "values": res.values}
    return out


def summary(phase: str, res: dict) -> list[str]:
    lines = []
    for name, r in res.items():
        if not r["available"]:
            lines.append(f"{phase:5} {name:5} unavailable: {r['reason']}")
            continue
        for g in r["values"]["per_gpu"]:
            ratio = g["energy_j"] / g["energy_integrated_j"] if g["energy_integrated_j"] else float("nan")
            lines.append(
                f"{phase:5} {name:5} gpu {g['gpu']} {g['model']}: mean {g['mean_w']:.1f} W, max {g['max_w']:.1f} W, "
                f"limit {g['limit_w']} W, energy {g['energy_method']} {g['energy_j']:.1f} J vs integrated "
                f"{g['energy_integrated_j']:.1f} J (ratio {ratio:.4f}) over {g['covered_s']:.2f} s, "
                f"{g['samples']} samples")
        lines += [f"{phase:5} {name:5} warning: {w}" for w in r["warnings"]]
    return lines


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--idle", type=float, default=10.0)
    p.add_argument("--load", type=float, default=15.0)
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--port", type=int, default=9400)
    a = p.parse_args()
    ok, reason = nvml_available()
    print(reason, flush=True)
    if not ok:
        return 2
    exporter = start_exporter(a.port, a.interval)
    url = f"http://127.0.0.1:{a.port}/metrics"
    report: dict = {"nvml": reason}
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
        print("--- exporter /metrics (power lines) ---")
        print("\n".join(line for line in text.splitlines()
                        if not line.startswith("#") and ("POWER" in line or "ENERGY" in line)))
        report["exporter_readings"] = [r.__dict__ for r in parse_dcgm(text).readings]
        report["idle"] = asyncio.run(measure(a.idle, a.interval, url))
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(a.load + 5)], stdout=subprocess.PIPE, text=True)
        ready = load.stdout.readline().strip()
        print(ready or "no GPU load library (torch, cupy) found: idle figures only", flush=True)
        if ready.startswith("ready"):
            time.sleep(2)  # let clocks and power settle under the loop
            report["load"] = asyncio.run(measure(a.load, a.interval, url))
            report["load_process"] = [ready, load.communicate(timeout=60)[0].strip()]
            print(report["load_process"][1])
        else:
            load.wait()
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)
    print("--- figures ---")
    for phase in ("idle", "load"):
        if phase in report:
            print("\n".join(summary(phase, report[phase])))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "h200_nvml_check.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
