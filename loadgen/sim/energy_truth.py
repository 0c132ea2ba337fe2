"""The simulated GPUs' exact energy over any past window, and a collector that refreshes the DCGM values on a
timer as dcgm-exporter does (`-c MS`).

`EnergyHistory` keeps every utilisation change as (t_ns, ∫u dt up to t_ns, u from t_ns on), so the exact
energy of a GPU over [a, b] is (idle_w + offset) · (b − a) + (load_w − idle_w) · (U(b) − U(a)), U(t) = ∫u dt.
`GET /truth/energy?start_ns=A&end_ns=B` on the simulator's DCGM port answers it as JSON
`{"per_gpu_j": [...], "total_j": x}`: the ground truth a cell's energy is tested against.

`timer_collector(gpus, interval_s)` is an aiohttp cleanup context: every interval_s on an absolute schedule
(t0 + k · interval_s, so the phase does not drift) the served values are refreshed; between refreshes every
scrape sees the values of the last collection, as from a real exporter.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right

from aiohttp import web


class EnergyHistory:
    """Utilisation changes of one GPU set, for the exact energy at past instants."""

    def __init__(self, t0_ns: int):
        self.t_ns = [t0_ns]
        self.u_integral_s = [0.0]
        self.u = [0.0]

    def changed(self, t_ns: int, u_integral_s: float, u: float) -> None:
        """From `t_ns` on the utilisation is `u`; ∫u dt up to `t_ns` is `u_integral_s`."""
        self.t_ns.append(t_ns)
        self.u_integral_s.append(u_integral_s)
        self.u.append(u)

    def integral_at_s(self, t_ns: int) -> float:
        """U(t) = ∫u dt from the start to `t_ns` (s); times before the start count as the start."""
        i = max(0, bisect_right(self.t_ns, t_ns) - 1)
        return self.u_integral_s[i] + self.u[i] * max(0, t_ns - self.t_ns[i]) / 1e9


def window_energy_j(gpus, start_ns: int, end_ns: int) -> list[float]:
    """Each GPU's exact energy over [start_ns, end_ns] (J)."""
    h = gpus.history
    du_s = h.integral_at_s(end_ns) - h.integral_at_s(start_ns)
    span_s = (end_ns - start_ns) / 1e9
    return [(gpus.idle_w + gpus.offset_w(i)) * span_s + (gpus.load_w - gpus.idle_w) * du_s for i in range(gpus.n)]


def truth_route(gpus):
    """The handler of GET /truth/energy?start_ns=A&end_ns=B."""
    async def handle(request: web.Request) -> web.Response:
        try:
            start_ns, end_ns = int(request.query["start_ns"]), int(request.query["end_ns"])
        except (KeyError, ValueError):
            return web.json_response({"error": "give start_ns and end_ns (monotonic ns)"}, status=400)
        per_gpu = window_energy_j(gpus, start_ns, end_ns)
        return web.json_response({"per_gpu_j": per_gpu, "total_j": sum(per_gpu)})
    return handle


def timer_collector(gpus, interval_s: float):
    """An aiohttp cleanup context refreshing `gpus`' served values every `interval_s` on an absolute schedule."""
    async def collect_forever() -> None:
        t0 = time.monotonic_ns()
        k = 0
        while True:
            gpus.collect(time.monotonic_ns())
            k += 1
            await asyncio.sleep(max(0.0, (t0 + k * interval_s * 1e9 - time.monotonic_ns()) / 1e9))

    async def context(app: web.Application):
        task = asyncio.ensure_future(collect_forever())
        yield
        task.cancel()
    return context
