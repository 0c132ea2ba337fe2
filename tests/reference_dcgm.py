"""A reference dcgm-exporter for tests, written apart from loadgen (none of its renderers or simulator): a
stdlib HTTP server on a loopback port that serves `/metrics` exactly as dcgm-exporter 4.x writes it, from a
scenario, collecting every `period_s` on a fixed schedule like `dcgm-exporter -c`.

A scenario maps a collection's index k to that collection's values ({DCGM field: value}); the exporter's own
time-weighted mean of a field over any window (`served_mean`) is the ground truth a cell is checked against.
The energy counter is the integral of the served power, so it moves at every collection, as a real one does.
It runs as a process of its own (`serve(name)`: `python3 tests/reference_dcgm.py SCENARIO`), so that it takes
nothing from the event loop of a loadgen run in the test's process; CLOCK_MONOTONIC is the machine's, so its
collection times and a cell's window are on one clock.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LABELS = ('gpu="{gpu}",UUID="GPU-5e1f0c2a-{gpu:04d}-4d6b-9a51-3c8e2f7a9b10",pci_bus_id="00000000:{bus:02X}:00.0",'
          'device="nvidia{gpu}",modelName="NVIDIA H200",Hostname="ref-node",DCGM_FI_DRIVER_VERSION="580.159.04"')
TYPES = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter", "DCGM_FI_DEV_POWER_VIOLATION": "counter"}
Scenario = Callable[[int], dict[str, float]]


class ReferenceDcgm:
    def __init__(self, scenario: Scenario, gpus: int = 2, period_s: float = 0.1):
        self.scenario, self.gpus, self.period_ns = scenario, gpus, int(period_s * 1e9)
        self.t0_ns = time.monotonic_ns()
        self._energy_mj: dict[int, float] = {}  # collection index -> energy counter then
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ReferenceDcgm:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def index(self, t_ns: int) -> int:
        return max(0, (t_ns - self.t0_ns) // self.period_ns)

    def energy_mj(self, k: int) -> float:
        with self._lock:
            done = max((i for i in self._energy_mj if i <= k), default=-1)
            energy = self._energy_mj.get(done, 0.0)
            for i in range(done + 1, k + 1):
                energy += self.scenario(i)["DCGM_FI_DEV_POWER_USAGE"] * self.period_ns / 1e6
                self._energy_mj[i] = energy
            return energy

    def text(self, t_ns: int) -> str:
        k = self.index(t_ns)
        values = dict(self.scenario(k)) | {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": int(self.energy_mj(k))}
        lines = []
        for name, value in values.items():
            lines += [f"# HELP {name} {name}.", f"# TYPE {name} {TYPES.get(name, 'gauge')}"]
            for gpu in range(self.gpus):
                lines.append(f"{name}{{{LABELS.format(gpu=gpu, bus=0x18 + 0x10 * gpu)}}} {value}")
        return "\n".join(lines) + "\n"

    def served_mean(self, name: str, start_ns: int, end_ns: int) -> float:
        """The exporter's own time-weighted mean of `name` over [start, end]: each collection's value over the
        time it was served."""
        total, t = 0.0, start_ns
        while t < end_ns:
            k = self.index(t)
            nxt = min(end_ns, self.t0_ns + (k + 1) * self.period_ns)
            total += self.scenario(k)[name] * (nxt - t)
            t = nxt
        return total / (end_ns - start_ns)

    def _handler(self):
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the stdlib's name)
                body = exporter.text(time.monotonic_ns()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler


def host_bound(k: int) -> dict:
    """GPU busy 12 % and 22 % in alternate collections (17 %): host work between steps."""
    return {"DCGM_FI_DEV_GPU_UTIL": 12 if k % 2 else 22, "DCGM_FI_DEV_SM_CLOCK": 1980,
            "DCGM_FI_DEV_POWER_USAGE": 180.0 + k % 3, "DCGM_FI_DEV_FB_USED": 120_000,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.1, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.02,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0}


def power_capped(k: int) -> dict:
    """Held at a 400 W limit: the power-cap reason in 8 of every 10 collections, the SM clock down."""
    capped = k % 10 < 8
    return {"DCGM_FI_DEV_GPU_UTIL": 99, "DCGM_FI_DEV_SM_CLOCK": 1250 if capped else 1700,
            "DCGM_FI_DEV_POWER_USAGE": 399.0 + k % 2 if capped else 380.0, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": 400,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.55, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.45,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x4 if capped else 0}


def memory_bound(k: int) -> dict:
    """Busy, DRAM 80 % active, the tensor pipe 12 %."""
    return {"DCGM_FI_DEV_GPU_UTIL": 96, "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_POWER_USAGE": 450.0 + k % 2,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.80, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.12,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0}


def power_only(k: int) -> dict:
    """dcgm-exporter with a counters CSV of power alone."""
    return {"DCGM_FI_DEV_POWER_USAGE": 300.0 + k % 2}


SCENARIOS = {f.__name__: f for f in (host_bound, power_capped, memory_bound, power_only)}


class ReferenceProcess:
    """The reference exporter of scenario `name` in a process of its own; `served_mean` as `ReferenceDcgm`'s."""

    def __init__(self, name: str):
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__)), name], stdout=subprocess.PIPE, text=True)
        ready = self.proc.stdout.readline().split()  # "ready URL T0_NS"
        self.url, t0_ns = ready[1], int(ready[2])
        self.mirror = ReferenceDcgm.__new__(ReferenceDcgm)
        self.mirror.scenario, self.mirror.period_ns, self.mirror.t0_ns = SCENARIOS[name], int(0.1e9), t0_ns

    def served_mean(self, name: str, start_ns: int, end_ns: int) -> float:
        return self.mirror.served_mean(name, start_ns, end_ns)

    def __enter__(self) -> ReferenceProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)


if __name__ == "__main__":
    with ReferenceDcgm(SCENARIOS[sys.argv[1]]) as ref:
        print("ready", ref.url, ref.t0_ns, flush=True)
        threading.Event().wait()
