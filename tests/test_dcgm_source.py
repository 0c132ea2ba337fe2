"""DcgmSource against simulated GPU nodes served on loopback sockets, while their load changes.

Truth from the simulator's own stamps, over exactly the span a figure covers: the simulated GPUs stamp every
load change and every /metrics answer (with each GPU's exact energy then), and the client session handed to
the source stamps every scrape. A busy machine delays scrapes by milliseconds; that moves the span, not the
agreement. Where a figure interpolates between readings or extrapolates over time no reading covered, its
bound is computed from the gaps measured in the same run, never assumed.
"""

import asyncio
import bisect
import contextlib
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from loadgen.metrics.power import derive_power
from loadgen.sim.gpus import SimulatedGpus
from loadgen.telemetry.base import SourceResult
from loadgen.telemetry.dcgm import DcgmSource
from tests.conftest import serve_metrics_app as serve

pytestmark = pytest.mark.sim

INTERVAL_S = 0.05
NOISE_W = 0.05  # the simulated readings' deterministic ±0.05 W; the energy truth has none
# The source dates a reading a few µs outside the span the session's trace sees; a preemption there moves
# one reading by up to a scheduler slice, which shifts a trapezoid next to a load step by ~1 %.
DATING_REL = 0.02


def energies_j(sim: SimulatedGpus, t_ns: int | None = None) -> list[float]:
    return [sim.energy_mj(i, t_ns) / 1000 for i in range(sim.n)]


class StampedGpus(SimulatedGpus):
    """Simulated GPUs that keep their own stamps: each load change (t_ns, utilisation), each /metrics answer
    (t_ns, every GPU's exact energy at that instant, J), and when they stopped answering."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.changes: list[tuple[int, float]] = [(time.monotonic_ns(), self.utilization)]
        self.renders: list[tuple[int, list[float]]] = []
        self.stopped_ns: int | None = None

    def set_utilization(self, u: float, t_ns: int | None = None) -> None:
        t_ns = time.monotonic_ns() if t_ns is None else t_ns
        super().set_utilization(u, t_ns)
        self.changes.append((t_ns, self.utilization))

    def render_metrics(self, t_ns: int | None = None) -> str:
        t_ns = time.monotonic_ns() if t_ns is None else t_ns
        self.renders.append((t_ns, energies_j(self, t_ns)))
        return super().render_metrics(t_ns)

    def stop_answering(self, mode: str = "hang") -> None:
        self.stopped_ns = time.monotonic_ns()
        super().stop_answering(mode)

    def answers(self) -> list[tuple[int, list[float]]]:
        """The answers the source got (a hung request released at shutdown renders after the source gave up)."""
        return [r for r in self.renders if self.stopped_ns is None or r[0] < self.stopped_ns]

    def power_at(self, gpu: int, t_ns: int) -> float:
        """What `gpu` drew at `t_ns` (W), from the stamped load changes."""
        u = self.changes[bisect.bisect_right([t for t, _ in self.changes], t_ns) - 1][1]
        return self.idle_w + self.offset_w(gpu) + (self.load_w - self.idle_w) * u

    def readings_w(self, gpu: int) -> list[float]:
        """The power each answer showed for `gpu`, less the sensor noise."""
        return [self.power_at(gpu, t) for t, _ in self.answers()]

    def span_s(self) -> float:
        """From the first to the last answer (s)."""
        return (self.answers()[-1][0] - self.answers()[0][0]) / 1e9

    def span_j(self, gpu: int) -> float:
        """Exact energy of `gpu` from the first to the last answer: what the counter readings cover."""
        return self.answers()[-1][1][gpu] - self.answers()[0][1][gpu]

    def swing_w(self) -> float:
        """The widest power swing of any GPU during the run (W)."""
        us = [u for _, u in self.changes]
        return (self.load_w - self.idle_w) * (max(us) - min(us))

    def steps_w(self) -> list[float]:
        """|ΔP| of each load change after the first answer (W)."""
        t_first = self.renders[0][0]
        return [(self.load_w - self.idle_w) * abs(b - a)
                for (_, a), (t, b) in itertools.pairwise(self.changes) if t > t_first]


class Scrapes:
    """The client's stamps, through aiohttp's tracing on the session handed to the source: when each scrape
    started and when its last byte arrived, per URL. The source dates a reading at the middle of the two."""

    def __init__(self):
        self.by_url: dict[str, list[list[int]]] = defaultdict(list)
        self.starts: dict[str, list[int]] = defaultdict(list)
        self.config = aiohttp.TraceConfig()
        self.config.on_request_start.append(self._start)
        self.config.on_request_end.append(self._end)
        self.config.on_response_chunk_received.append(self._end)

    async def _start(self, session, ctx, params) -> None:
        ctx.span = [time.monotonic_ns(), None]
        self.starts[str(params.url)].append(ctx.span[0])

    async def _end(self, session, ctx, params) -> None:
        if ctx.span[1] is None:
            self.by_url[str(params.url)].append(ctx.span)
        ctx.span[1] = time.monotonic_ns()

    def instants_ns(self, url: str) -> list[int]:
        return [(t0 + t1) // 2 for t0, t1 in self.by_url[url]]

    def longest_gap_s(self, url: str) -> float:
        return max(b - a for a, b in itertools.pairwise(self.instants_ns(url))) / 1e9

    def longest_scrape_s(self) -> float:
        return max(t1 - t0 for spans in self.by_url.values() for t0, t1 in spans) / 1e9


def trapezoid_j(instants_ns: list[int], readings_w: list[float]) -> float:
    """The trapezoid rule over readings dated `instants_ns` (J): the source's formula, on the true readings."""
    assert len(instants_ns) == len(readings_w)
    return sum((a + b) / 2 * (t1 - t0) / 1e9
               for (t0, a), (t1, b) in itertools.pairwise(zip(instants_ns, readings_w)))


def exact_j(sim: StampedGpus, gpu: int, t0_ns: int, t1_ns: int) -> float:
    """Exact energy of `gpu` over [t0_ns, t1_ns] (J), from the stamped load changes."""
    cuts = sorted({t0_ns, t1_ns, *(t for t, _ in sim.changes if t0_ns < t < t1_ns)})
    return sum(sim.power_at(gpu, a) * (b - a) / 1e9 for a, b in itertools.pairwise(cuts))


def extrapolation_bound_j(g: dict, sim: StampedGpus, window_s: float) -> float:
    """How far one GPU's counter energy scaled from its readings' span to the window (`cell_energy_j`) may be
    from the truth over the window: the time no reading covered, at the widest power swing, plus the scaling's
    error from dating readings mid-scrape rather than at the answer."""
    return (sim.swing_w() * (window_s - sim.span_s())
            + max(sim.readings_w(g["gpu"])) * window_s * abs(g["covered_s"] - sim.span_s()) / g["covered_s"])


@dataclass
class Cell:
    src: DcgmSource
    res: SourceResult
    urls: list[str]
    scrapes: Scrapes
    truth: list[list[float]]  # each GPU's exact energy over the source's own window [t_start_ns, t_stop_ns]
    steps_ns: tuple[int, int]  # when the first step began (start() had returned) and the last one ended


async def run_cell(sims, steps, urls=None, **kw) -> Cell:
    """Start a DcgmSource, apply `steps` [(seconds, utilisation or callable)], stop."""
    scrapes = Scrapes()
    async with contextlib.AsyncExitStack() as stack:
        urls = urls or [await stack.enter_async_context(serve(s.make_app())) for s in sims]
        session = await stack.enter_async_context(aiohttp.ClientSession(trace_configs=[scrapes.config]))
        src = DcgmSource(urls, interval_s=INTERVAL_S, session=session, **kw)
        await src.start()
        # the load has not changed since t_start_ns (nor will it after t_stop_ns): both energies are exact
        at_start = [energies_j(s, src.t_start_ns) for s in sims]
        steps_start_ns = time.monotonic_ns()
        for duration_s, action in steps:
            for s in sims:
                action(s) if callable(action) else s.set_utilization(action)
            await asyncio.sleep(duration_s)
        steps_end_ns = time.monotonic_ns()
        result = await src.stop()
        at_stop = [energies_j(s, src.t_stop_ns) for s in sims]
    # the scrape in flight when the source stopped is cancelled: an answer the node rendered for it never reached
    # the source, so it is not one the source read. It is the last scrape sent before the stop (a node answers in
    # the order it is asked), and may come before the answers to the stop's own scrapes.
    read = {n["url"]: n["scrapes_ok"] for n in result.values.get("nodes") or []}
    for s, url in zip(sims, urls):
        if isinstance(s, StampedGpus) and s.stopped_ns is None and url in read and len(s.renders) > read[url]:
            assert len(s.renders) == read[url] + 1, (url, len(s.renders), read[url])
            del s.renders[bisect.bisect_left(scrapes.starts[url], steps_end_ns) - 1]
    truth = [[a - b for a, b in zip(aa, bb)] for aa, bb in zip(at_stop, at_start)]
    return Cell(src, result, urls, scrapes, truth, (steps_start_ns, steps_end_ns))


LOAD_STEPS = [(0.12, 0.1), (0.15, 1.0), (0.1, 0.0), (0.13, 0.6)]


def test_energy_and_per_gpu_stats_match_the_truth_on_two_nodes():
    sims = [StampedGpus(n=4, hostname="node-a"), StampedGpus(n=2, hostname="node-b", limit_w=700.0)]
    cell = asyncio.run(run_cell(sims, LOAD_STEPS))
    res, urls, scrapes = cell.res, cell.urls, cell.scrapes
    assert res.available and res.name == "dcgm" and res.kind == "power"
    v = res.values
    assert v["source"] == "dcgm" and v["gpus"] == 6 and v["energy_method"] == "counter"
    window_s = v["window_s"]
    for s in sims:  # read at the start and at the stop: the readings hold every load change between them
        assert s.renders[0][0] < cell.steps_ns[0] and cell.steps_ns[1] < s.renders[-1][0]
    # counters: the energy drawn between the first and the last reading, exactly (mJ integers, ~100 J each)
    assert v["energy_j"] == pytest.approx(sum(s.span_j(i) for s in sims for i in range(s.n)), rel=1e-4)
    bound_j = 0.0
    for g, sim_i, gpu_i in zip(v["per_gpu"], [0, 0, 0, 0, 1, 1], [0, 1, 2, 3, 0, 1]):
        sim, url = sims[sim_i], urls[sim_i]
        assert (g["node"], g["gpu"], g["uuid"]) == (url, gpu_i, sim.uuids[gpu_i])
        assert g["hostname"] == sim.hostname and g["model"] == "NVIDIA B300 (simulated)"
        assert g["energy_j"] == pytest.approx(sim.span_j(gpu_i), rel=1e-4)
        # mean power: the time-weighted mean of what the GPU drew at the instants it was read ...
        instants, readings = scrapes.instants_ns(url), sim.readings_w(gpu_i)
        covered_s = (instants[-1] - instants[0]) / 1e9
        oracle_w = trapezoid_j(instants, readings) / covered_s
        assert g["mean_w"] == pytest.approx(oracle_w, abs=NOISE_W, rel=DATING_REL)
        # ... which is the exact mean within the trapezoid's error, |ΔP|·gap/2 per load step, for the widest
        # gap between readings this run had (and where in its scrape each reading was dated)
        steps_j = sum(sim.steps_w()) * (scrapes.longest_gap_s(url) / 2 + scrapes.longest_scrape_s())
        exact_w = exact_j(sim, gpu_i, instants[0], instants[-1]) / covered_s
        assert abs(g["mean_w"] - exact_w) <= steps_j / covered_s + NOISE_W + DATING_REL * exact_w
        assert g["max_w"] == pytest.approx(max(readings), abs=NOISE_W + 1e-6)
        assert g["limit_w"] == sim.limit_w and g["energy_method"] == "counter"
        bound_j += extrapolation_bound_j(g, sim, window_s)
    rounds_w = [sum(sum(s.power_at(i, s.renders[k][0]) for i in range(s.n)) for s in sims)
                for k in range(min(len(s.renders) for s in sims))]
    assert max(rounds_w) == pytest.approx(sum(s.load_w + s.offset_w(i) for s in sims for i in range(s.n)))
    assert v["max_w_total"] == pytest.approx(max(rounds_w), abs=6 * NOISE_W + 1e-6)
    assert v["mean_w_total"] == pytest.approx(sum(g["mean_w"] for g in v["per_gpu"]))
    assert v["limit_w_total"] == 4 * 1100 + 2 * 700
    assert v["power_fraction_of_limit"] == pytest.approx(v["mean_w_total"] / 5800)
    assert res.warnings == []

    # energy per token against the truth over the cell's window: the figure the issue asks for
    tokens = 12_345
    d = derive_power(v, output_tokens=tokens, duration_s=window_s)
    true_j = sum(map(sum, cell.truth))
    assert abs(d["cell_energy_j"] - true_j) <= bound_j + 1e-4 * true_j, (d["cell_energy_j"], true_j, bound_j)
    assert d["j_per_output_token"] == pytest.approx(d["cell_energy_j"] / tokens)
    assert d["output_tokens_per_j"] == pytest.approx(tokens / d["cell_energy_j"])


@pytest.mark.parametrize("mode", ["hang", "close", "error"])
def test_node_that_stops_answering_is_reported_and_its_data_kept(mode):
    sims = [StampedGpus(n=2, hostname="node-a"), StampedGpus(n=2, hostname="node-b")]
    for s in sims:
        s.set_utilization(0.5)  # constant load: node b's figures before it stopped are exact
    steps = [(0.3, 0.5), (0.3, lambda s: s.stop_answering(mode) if s.hostname == "node-b" else None)]
    cell = asyncio.run(run_cell(sims, steps))
    v, res, urls = cell.res.values, cell.res, cell.urls
    node_a, node_b = sims
    assert res.available and v["gpus"] == 4
    (warning,) = [w for w in res.warnings if "stopped answering" in w]
    assert urls[1] in warning and " s into the cell" in warning
    # b first failed in the round under way when it stopped, or the next one; both scrapes of a round start
    # together, so a's scrape starts bracket the moment (the warning rounds it to 0.1 s)
    since_s = float(warning.split("stopped answering ")[1].split(" s")[0])
    starts = cell.scrapes.starts[urls[0]]
    k = bisect.bisect_right(starts, node_b.stopped_ns)
    lo_s, hi_s = [(t - cell.src.t_start_ns) / 1e9 for t in (starts[k - 1], starts[k])]
    assert lo_s - 0.05 <= since_s <= hi_s + 0.005 + 0.05, (since_s, lo_s, hi_s)
    a, b = v["per_gpu"][:2], v["per_gpu"][2:]
    # a was read from the start to the stop; b from the start until it stopped, and not after
    assert node_a.renders[0][0] < cell.steps_ns[0] and cell.steps_ns[1] < node_a.renders[-1][0]
    assert node_b.answers()[-1][0] < node_b.stopped_ns
    for g, sim in zip(a + b, [node_a] * 2 + [node_b] * 2):
        assert g["covered_s"] == pytest.approx(sim.span_s(), abs=cell.scrapes.longest_scrape_s())
        assert g["energy_j"] == pytest.approx(sim.span_j(g["gpu"]), rel=1e-4)
        assert g["mean_w"] == pytest.approx(sim.power_w(g["gpu"]), abs=0.1)
    # per-token energy extrapolates node b (kept data) over the whole window, at constant load
    d = derive_power(v, output_tokens=1000, duration_s=v["window_s"])
    truth_j = sum(map(sum, cell.truth))
    assert truth_j == pytest.approx(sum(s.power_w(i) for s in sims for i in range(s.n)) * v["window_s"])
    bound_j = sum(extrapolation_bound_j(g, sim, v["window_s"]) for g, sim in zip(a + b, [node_a] * 2 + [node_b] * 2))
    assert abs(d["cell_energy_j"] - truth_j) <= bound_j + 1e-4 * truth_j, (d["cell_energy_j"], truth_j, bound_j)
    assert cell.src._nodes[1].failed >= 1 and cell.src._nodes[0].failed == 0


def test_counter_reset_mid_cell():
    steps = [(0.2, 0.3), (0.2, lambda s: (s.set_utilization(1.0), s.reset_counter())), (0.2, 0.2)]
    sim = StampedGpus(n=3)
    res = asyncio.run(run_cell([sim], steps)).res
    v = res.values
    assert all(g["counter_resets"] == 1 for g in v["per_gpu"])
    # the segments before and after the restart, and the interval that straddles it, add up to the energy
    # drawn between the first and the last reading
    assert v["energy_j"] == pytest.approx(sum(sim.span_j(i) for i in range(sim.n)), rel=0.02)
    assert any("energy counter restarted" in w for w in res.warnings)


def test_integration_fallback_without_the_energy_counter():
    sim = StampedGpus(n=2, export_energy=False)
    cell = asyncio.run(run_cell([sim], LOAD_STEPS))
    v, url = cell.res.values, cell.urls[0]
    assert v["energy_method"] == "integrated"
    assert all(g["energy_method"] == "integrated" for g in v["per_gpu"])
    instants = cell.scrapes.instants_ns(url)
    covered_s = (instants[-1] - instants[0]) / 1e9
    # the trapezoid errs by at most |ΔP|·gap/2 at each load step (the start from idle included), for the
    # widest gap between readings this run had (and where in its scrape each reading was dated)
    slack_s = cell.scrapes.longest_gap_s(url) / 2 + cell.scrapes.longest_scrape_s()
    for i, g in enumerate(v["per_gpu"]):
        # the source's integral is the trapezoid over what the GPU drew at the instants it was read ...
        oracle_j = trapezoid_j(instants, sim.readings_w(i))
        assert g["energy_j"] == pytest.approx(oracle_j, abs=NOISE_W * covered_s, rel=DATING_REL)
        # ... and so the exact energy between the first and the last reading within the trapezoid's error
        t = exact_j(sim, i, instants[0], instants[-1])
        assert g["energy_j"] == pytest.approx(t, abs=DATING_REL * t + sum(sim.steps_w()) * slack_s)
    (warning,) = [w for w in cell.res.warnings if "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in w]
    assert "integrated" in warning and "trapezoid" in warning


def test_frozen_exporter_values_are_flagged():
    sim = SimulatedGpus(n=2, collect_interval_s=30.0)
    res = asyncio.run(run_cell([sim], [(0.1, 0.0), (0.15, 1.0)])).res
    (warning,) = [w for w in res.warnings if "identical values" in w]
    assert "-c 1000" in warning


def test_missing_power_limit_and_blank_sentinels_are_reported():
    text = (
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x",modelName="M",Hostname="h"} 100.5\n'
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-x",modelName="M",Hostname="h"} 1000\n'
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0",UUID="GPU-x",modelName="M",Hostname="h"} 9223372036854775794\n'
    )

    async def handler(request):
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", handler)

    async def go():
        async with serve(app) as url:
            return await run_cell([], [(0.15, lambda s: None)], urls=[url.removesuffix("/metrics")])

    res = asyncio.run(go()).res
    g = res.values["per_gpu"][0]
    assert g["limit_w"] is None and res.values["power_fraction_of_limit"] is None
    assert any("blank values" in w and "DCGM_FI_DEV_ENFORCED_POWER_LIMIT" in w for w in res.warnings)
    assert any("no power limit" in w and "DCGM_FI_DEV_POWER_MGMT_LIMIT" in w for w in res.warnings)


def test_no_exporter_answering_is_unavailable_not_zero():
    async def go():
        async with serve(web.Application()) as url:  # a server, but 404 on /metrics
            pass
        src = DcgmSource([url, url.replace("/metrics", "/other")], interval_s=INTERVAL_S)
        await src.start()
        await asyncio.sleep(0.1)
        return await src.stop()

    res = asyncio.run(go())
    assert not res.available and res.values == {}
    assert "no dcgm-exporter answered" in res.reason and "127.0.0.1" in res.reason
