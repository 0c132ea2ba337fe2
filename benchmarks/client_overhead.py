"""Client CPU per chunk and max chunks/s: loadgen's client beside the raw reader, in one run, one server.

    python benchmarks/client_overhead.py [--mode burst,paced] [--concurrency 1,32,128,512,1024] [--reps 3]
        [--seconds 2] [--json OUT] [--scaling-workers 1,2,4,8 --scaling-concurrency 1024 --server-procs 4]

The fast SSE server (benchmarks/fast_sse_server.py) runs in its own process pinned to one core; this process
pins itself to another. For every (mode, concurrency, repetition) both clients run a closed loop of
`concurrency` streams for `--seconds`, one after the other (their order alternates between repetitions), each
after `--warm-seconds` of the same load unmeasured (burst; a paced answer takes seconds), as a cell's warmup
requests come before its measured window: a fresh process's first requests (caches filled, memory first touched)
are no cell's steady cost.
CPU is this process's user+system time over the measurement (`time.process_time`), so it is the client's
own cost even when other programs share the machine; per chunk = CPU / content chunks received. Max chunks/s
is chunks / wall time: the client's ceiling when its CPU use is near 100 %, else the server's pace.
Figures are the medians over the repetitions; the ratio is loadgen/raw of the medians.

`--scaling-workers` also runs the real CLI (`loadgen --workers N`) against a multi-process fast server and
reports chunks/s per worker count (client parent + workers are left to the OS scheduler on the cores not
given to the server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from raw_reader import RawConnection, request_bytes  # noqa: E402

from loadgen.client.api import RequestOptions, build_body  # noqa: E402
from loadgen.record import CellKey, Record  # noqa: E402
from loadgen.schedule.cell_run import CellRun  # noqa: E402
from loadgen.schedule.closed import closed_loop  # noqa: E402
from loadgen.schedule.jobs import Job  # noqa: E402

PATH = "/v1/chat/completions"
READY = re.compile(rb"ready on (http://\S+)")


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "fast_sse_server.py"), "--port", "0", *args],
                            stdout=subprocess.PIPE)
    line = proc.stdout.readline()
    m = READY.search(line)
    if not m:
        proc.kill()
        raise RuntimeError(f"fast server did not start: {line!r}")
    return proc, m.group(1).decode()


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def chat_body(prompt_chars: int = 240) -> dict:
    opts = RequestOptions(model="fast-sse", max_tokens=512)
    return build_body("openai-chat", "x" * prompt_chars, opts)


class Tally:
    def __init__(self) -> None:
        self.requests = 0
        self.failed = 0
        self.chunks = 0
        self.tokens = 0


async def measure(make_client, url: str, c: int, seconds: float, warm_s: float = 0.0) -> dict:
    """Run `c` closed-loop streams for `seconds` with one client; CPU and wall over the whole measurement, after
    `warm_s` of the same load unmeasured (as a cell's warmup requests come before its measured window)."""
    client = await make_client(url, c)
    try:
        if warm_s > 0:
            await client.run(c, warm_s)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        tally = await client.run(c, seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        await client.close()
    return {"cpu_s": cpu, "wall_s": wall, "chunks": tally.chunks, "requests": tally.requests,
            "failed": tally.failed, "tokens": tally.tokens,
            "cpu_us_per_chunk": 1e6 * cpu / tally.chunks if tally.chunks else None,
            "chunks_per_s": tally.chunks / wall if wall else None, "cpu_util": cpu / wall if wall else None}


class RawClient:
    def __init__(self, url: str, conns: list[RawConnection]):
        self.request = request_bytes(url, PATH, chat_body())
        self.conns = conns

    @classmethod
    async def make(cls, url: str, c: int) -> "RawClient":
        return cls(url, list(await asyncio.gather(*(RawConnection.open(url) for _ in range(c)))))

    async def run(self, c: int, seconds: float) -> Tally:
        tally = Tally()
        deadline = time.monotonic() + seconds

        async def slot(conn: RawConnection) -> None:
            while time.monotonic() < deadline:
                res = await conn.stream(self.request)
                tally.requests += 1
                tally.chunks += res.chunks
                tally.tokens += res.completion_tokens or 0

        await asyncio.gather(*(slot(conn) for conn in self.conns))
        return tally

    async def close(self) -> None:
        for conn in self.conns:
            conn.close()


class LoadgenClient:
    """loadgen's request path as the runner drives it: scheduler slots → sender → one Record each.

    `http_client` "h1" is the default path (loadgen.client.h1_sender over loadgen.client.h1), "aiohttp" the alternative
    (`--http-client aiohttp`, loadgen.client.aiohttp_sender.send)."""

    def __init__(self, url: str, c: int, http_client: str):
        from loadgen.client import aiohttp_sender as client
        self.base = client
        self.cfg = client.ClientConfig(base_url=url, api="openai-chat")
        self.body = chat_body()
        self.http_client = http_client
        if http_client == "h1":
            from loadgen.client.h1 import Pool
            from loadgen.client.h1_sender import Sender
            self.pool = Pool(url)
            self.send = Sender(self.pool, self.cfg)
        else:
            self.session = client.make_session(self.cfg)
            self.send = lambda body, rec: client.send(self.session, self.cfg, body, rec)

    @classmethod
    def maker(cls, http_client: str):
        async def make(url: str, c: int) -> "LoadgenClient":
            self = cls(url, c, http_client)
            await self.warm(url, c)
            # enough jobs for any run (built before the measurement, as the runner builds a cell's jobs)
            self.jobs = [Job(seq=i, phase="measure", body=self.body) for i in range(c + 200_000)]
            try:
                from loadgen.client.h1_sender import settle_gc
                settle_gc()  # as the runner does before each cell
            except ImportError:  # measuring a version from before the h1 path
                pass
            return self
        return make

    async def warm(self, url: str, c: int) -> None:
        if self.http_client == "h1":
            await self.pool.warm(c)
            return

        async def one() -> None:
            async with self.session.get(url + "/v1/models") as resp:
                await resp.read()

        await asyncio.gather(*(one() for _ in range(c)))

    async def run(self, c: int, seconds: float) -> Tally:
        tally = Tally()
        kept = keeper()

        def on_record(rec: Record) -> None:
            tally.requests += 1
            if rec.outcome != "ok":
                tally.failed += 1
            tally.chunks += rec.chunks
            tally.tokens += rec.completion_tokens or 0
            kept.keep(rec)  # as a cell keeps its measured records for the summary

        run = CellRun("bench", CellKey(60, c), self.jobs, self.send, lambda: None, on_record,
                      time.monotonic_ns() + int(seconds * 1e9))
        await closed_loop(run, c)
        kept.close()
        return tally

    async def close(self) -> None:
        if self.http_client == "h1":
            self.pool.close()
        else:
            await self.session.close()


class _CompactList(list):
    """How a cell kept its records before `loadgen.run.chunk_spill` (each one compact, until the summary)."""

    def keep(self, rec: Record) -> None:
        self.append(rec.compact())

    def close(self) -> None:
        pass


try:  # imported here, as the CLI imports it at its start: its first import (numpy's, ~0.2 s CPU) is no cell's work
    from loadgen.run.chunk_spill import CellRecords
except ImportError:  # measuring a version from before loadgen.run.chunk_spill
    CellRecords = None


def keeper():
    """What the runner keeps a cell's measured records in: this version's `CellRecords`, or a list."""
    return _CompactList() if CellRecords is None else CellRecords()


CLIENTS = {"raw": RawClient.make, "loadgen": LoadgenClient.maker("h1"),
           "aiohttp": LoadgenClient.maker("aiohttp")}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


async def bench_mode(url: str, mode: str, concurrencies: list[int], reps: int, seconds: float,
                     clients: tuple[str, ...] = ("raw", "loadgen"), warm_s: float = 0.0) -> list[dict]:
    rows = []
    for c in concurrencies:
        runs: dict[str, list[dict]] = {name: [] for name in clients}
        for rep in range(reps):
            order = clients if rep % 2 == 0 else clients[::-1]
            for name in order:
                runs[name].append(await measure(CLIENTS[name], url, c, seconds, warm_s))
        row = {"mode": mode, "concurrency": c}
        for name, rs in runs.items():
            row[name] = {"cpu_us_per_chunk": median([r["cpu_us_per_chunk"] for r in rs]),
                         "chunks_per_s": median([r["chunks_per_s"] for r in rs]),
                         "cpu_util": median([r["cpu_util"] for r in rs]),
                         "failed": sum(r["failed"] for r in rs),
                         "runs": rs}
        if "raw" in row and "loadgen" in row:
            row["ratio"] = row["loadgen"]["cpu_us_per_chunk"] / row["raw"]["cpu_us_per_chunk"]
        if "raw" in row and "aiohttp" in row:
            row["ratio_aiohttp"] = row["aiohttp"]["cpu_us_per_chunk"] / row["raw"]["cpu_us_per_chunk"]
        rows.append(row)
        print(fmt_row(row, clients), flush=True)
    return rows


def fmt_header(clients) -> str:
    cols = "".join(f" {name + ' µs/chk':>15}" for name in clients)
    rates = "".join(f" {name + ' chk/s':>14}" for name in clients)
    cpus = "".join(f" {name[:7] + ' cpu':>11}" for name in clients)
    return f"{'mode':<6} {'conc':>5}{cols} {'lg/raw':>6} {'aio/raw':>7}{rates}{cpus} {'failed':>6}"


def fmt_row(r: dict, clients) -> str:
    def f(x, spec):
        return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0].rstrip("f%")))
    cols = "".join(f" {f(r[n]['cpu_us_per_chunk'], '15.2f')}" for n in clients)
    rates = "".join(f" {f(r[n]['chunks_per_s'], '14.0f')}" for n in clients)
    cpus = "".join(f" {f(r[n]['cpu_util'], '11.0%')}" for n in clients)
    failed = sum(r[n]["failed"] for n in clients)
    return (f"{r['mode']:<6} {r['concurrency']:>5}{cols} {f(r.get('ratio'), '6.2f')} "
            f"{f(r.get('ratio_aiohttp'), '7.2f')}{rates}{cpus} {failed:>6}")


def pin_self(server_cpu: int | None) -> str:
    if not hasattr(os, "sched_getaffinity"):
        return "unpinned"
    cpus = sorted(os.sched_getaffinity(0))
    mine = [c for c in cpus if c != server_cpu] or cpus
    os.sched_setaffinity(0, {mine[0]})
    return f"cpu {mine[0]}"


def machine() -> str:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import aiohttp
    return (f"{platform.node()} {model} {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"aiohttp {aiohttp.__version__}")


def scaling(workers: list[int], concurrency: int, server_procs: int, seconds: float, reps: int,
            events: int) -> list[dict]:
    """chunks/s of the real CLI with --workers N against a multi-process fast server."""
    cpus = (sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else list(range(os.cpu_count())))
    server_cpus = cpus[-server_procs:] if len(cpus) > server_procs else cpus
    client_cpus = [c for c in cpus if c not in server_cpus] or cpus
    proc, url = start_server("--mode", "burst", "--procs", str(server_procs), "--events", str(events),
                             "--cpus", ",".join(map(str, server_cpus)))
    rows = []
    try:
        for n in workers:
            vals = []
            for _ in range(reps):
                with tempfile.TemporaryDirectory() as tmp:
                    out = os.path.join(tmp, "r.json")
                    cmd = [sys.executable, "-m", "loadgen", "--url", url, "--concurrency", str(concurrency),
                           "--contexts", "60", "--max-tokens", str(events * 4), "--duration-per-cell",
                           str(seconds), "--workers", str(n), "--out", out, "--server-metrics", "off"]
                    path = [str(HERE.parent), os.environ.get("PYTHONPATH")]
                    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
                    t0 = time.perf_counter()
                    subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=seconds * 4 + 120,
                                   preexec_fn=lambda: _pin(client_cpus))
                    wall = time.perf_counter() - t0
                    cell = json.load(open(out))["cells"][0]
                    chunks = cell["output_tokens"] / cell["tokens_per_chunk_mean"]
                    client = cell["client"]
                    vals.append({"chunks_per_s": chunks / cell["duration_s"], "wall_s": wall,
                                 "saturated": client["saturated"], "reasons": client.get("reasons"),
                                 "cpu_percent": client.get("cpu_percent"),
                                 "cpu_percent_total": client.get("cpu_percent_total",
                                                                 client.get("cpu_percent")),
                                 "failed": cell["requests"]["failed"]})
            row = {"workers": n, "concurrency": concurrency,
                   "chunks_per_s": median([v["chunks_per_s"] for v in vals]), "runs": vals}
            rows.append(row)
            cpu = median([v["cpu_percent_total"] for v in vals])
            print(f"workers {n:>3}  concurrency {concurrency}  chunks/s {row['chunks_per_s']:>10.0f}  "
                  f"client CPU {cpu:>5.0f}% (all processes)  saturated {[v['saturated'] for v in vals]}  "
                  f"failed {sum(v['failed'] for v in vals)}", flush=True)
    finally:
        stop(proc)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="burst,paced", help="burst, paced, burst,paced or both (default both)")
    p.add_argument("--concurrency", default="1,32,128,512,1024")
    p.add_argument("--paced-concurrency", default="1,128,512", help="concurrencies of the paced mode")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0, help="burst: seconds per measurement")
    p.add_argument("--paced-seconds", type=float, default=8.0, help="paced: seconds per measurement")
    p.add_argument("--warm-seconds", type=float, default=0.5,
                   help="burst: seconds of the same load before each measurement, unmeasured (0: none)")
    p.add_argument("--events", type=int, default=128, help="burst: content events per response")
    p.add_argument("--paced-events", type=int, default=128, help="paced: content events per response")
    p.add_argument("--step-ms", type=float, default=25.0, help="paced: step interval")
    p.add_argument("--scaling-workers", help="also measure `loadgen --workers N` for these N (e.g. 1,2,4,8)")
    p.add_argument("--scaling-concurrency", type=int, default=1024)
    p.add_argument("--scaling-seconds", type=float, default=8.0)
    p.add_argument("--server-procs", type=int, default=4)
    p.add_argument("--clients", default="raw,loadgen,aiohttp",
                   help="clients to run: raw, loadgen (default h1 path), aiohttp (loadgen's aiohttp path)")
    p.add_argument("--json", help="write every measurement here")
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]))
    print("machine:", machine())
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    out = {"command": sys.argv, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "rows": [], "scaling": []}
    modes = ["burst", "paced"] if a.mode == "both" else a.mode.split(",")
    if not set(modes) <= {"burst", "paced"}:
        print(f"error: --mode {a.mode!r}: give burst, paced, burst,paced or both", file=sys.stderr)
        sys.exit(2)
    for mode in modes:
        if mode == "burst":
            args = ["--mode", "burst", "--events", str(a.events)]
            concs, seconds, warm_s = a.concurrency, a.seconds, a.warm_seconds
        else:
            args = ["--mode", "paced", "--events", str(a.paced_events), "--step-ms", str(a.step_ms)]
            concs, seconds, warm_s = a.paced_concurrency, a.paced_seconds, 0.0  # a paced answer takes seconds
        proc, url = start_server(*args)
        try:
            print(f"\n{mode}: server {url} ({' '.join(args)}); client {pin_self(_server_cpu(proc))}")
            print(fmt_header(tuple(a.clients.split(","))))
            out["rows"] += asyncio.run(bench_mode(url, mode, [int(c) for c in concs.split(",")], a.reps,
                                                  seconds, tuple(a.clients.split(",")), warm_s))
        finally:
            stop(proc)
    if a.scaling_workers:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(range(os.cpu_count())))
        print(f"\nscaling: loadgen --workers N, burst server with {a.server_procs} processes")
        out["scaling"] = scaling([int(x) for x in a.scaling_workers.split(",")], a.scaling_concurrency,
                                 a.server_procs, a.scaling_seconds, a.reps, a.events)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


def _pin(cpus: list[int]) -> None:
    try:
        os.sched_setaffinity(0, set(cpus))  # inherited by the workers
    except (OSError, AttributeError):
        pass


def _server_cpu(proc) -> int | None:
    try:
        cpus = os.sched_getaffinity(proc.pid)
    except (OSError, AttributeError):
        return None
    return next(iter(cpus)) if len(cpus) == 1 else None


if __name__ == "__main__":
    sys.exit(main())
