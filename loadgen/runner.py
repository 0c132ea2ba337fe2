"""Runs the matrix: for each prompt length, for each load level, one cell; records flow to the sinks,
telemetry is cut to the cell's window, and the results file is replaced after every cell."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime

import aiohttp

from loadgen import __version__
from loadgen.api import RequestOptions, build_body
from loadgen.client import ClientConfig, make_session, send
from loadgen.config import RunConfig
from loadgen.errors import ServerError, UsageError
from loadgen.files import write_json_atomic
from loadgen.monitor import LoopMonitor
from loadgen.record import CellKey, Record, RunAnchor
from loadgen.scheduler import CellRun, JobList, closed_loop
from loadgen.sinks.base import Sink
from loadgen.summary import summarize
from loadgen.table import header, row, table
from loadgen.target import Target, TokenCounter, discover, probe_prompt_tokens
from loadgen.telemetry import cell as cell_telemetry
from loadgen.telemetry.sources import build_factories
from loadgen.workload import (
    Corpus,
    WorkloadError,
    chars_for,
    fit_prompts,
    load_prompts_file,
    seeded_rng,
    stdlib_corpus,
    unique_prefix,
)

SCHEMA = "loadgen.results/v1"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """One status line on stderr (only on a terminal): requests done and live tok/s of the current cell."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.done = 0
        self.total = 0
        self.tokens = 0
        self.t0 = time.monotonic()
        self.label = ""

    def reset(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.tokens, self.t0 = label, total, 0, 0, time.monotonic()

    def add(self, rec: Record) -> None:
        self.done += 1
        self.tokens += rec.completion_tokens or 0

    def draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        frac = self.done / self.total if self.total else 0.0
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        rate = self.tokens / max(time.monotonic() - self.t0, 1e-9)
        sys.stderr.write(f"\r  {self.label:<22} [{bar}] {self.done}/{self.total} req  {rate:8.1f} tok/s ")
        sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()


async def warm_connections(session: aiohttp.ClientSession, url: str, n: int) -> None:
    """Open `n` keep-alive connections before the cell, so no measured request pays for a TCP handshake
    (production clients keep connections open; a cold connect would be charged to the first wave's TTFT)."""
    async def one() -> None:
        try:
            async with session.get(url + "/v1/models") as resp:
                await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError):
            pass  # a server that is down shows up in the cell's records, not here

    await asyncio.gather(*(one() for _ in range(min(n, 1024))))


class Runner:
    def __init__(self, cfg: RunConfig, url: str, sinks: list[Sink], results_path: str,
                 run_id: str | None = None):
        self.cfg = cfg
        self.url = url
        self.sinks = sinks
        self.results_path = results_path
        self.run_id = run_id or datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.anchor = RunAnchor.now()
        self.progress = Progress()
        self.cells: list[dict] = []
        self.target: Target | None = None
        self.corpus: Corpus | None = None
        self.overhead_tokens = 0
        self.counter: TokenCounter | None = None  # the server's tokenizer, when it has /v1/tokenize
        self.chars_per_token = 4.0  # without it: measured by the setup probe
        self.stopping = False  # set by the first interrupt, or when the server went away (--on-server-down stop)
        self.stop_reason = "not measured: the run stopped early"
        self.current: CellRun | None = None
        self.load: asyncio.Future | None = None  # the current cell's load; cancelling it cancels in-flight requests
        self.pause = None  # coroutine(record) a closed loop awaits after each request (back-off when failing)
        self.headers: dict = {}
        self.doc: dict = {}

    # ---- setup ----------------------------------------------------------------------------------------
    async def setup(self, session: aiohttp.ClientSession) -> None:
        cfg = self.cfg
        self.target = await discover(session, self.url, cfg.api, cfg.model, cfg.api_key_env, cfg.api_key_file)
        t = self.target
        if t.max_model_len:
            too_long = [c for c in cfg.contexts if c + cfg.max_tokens > t.max_model_len]
            if too_long:
                raise UsageError(f"--contexts {','.join(map(str, too_long))} + --max-tokens {cfg.max_tokens} "
                                 f"exceed the server's max model length {t.max_model_len}; use shorter contexts "
                                 "or fewer --max-tokens")
        try:
            texts = load_prompts_file(cfg.prompts_file) if cfg.prompts_file else None
            self.corpus = Corpus.from_texts(texts) if texts else Corpus(stdlib_corpus())
        except WorkloadError as exc:
            raise UsageError(str(exc)) from None
        self.counter = TokenCounter(session, t) if t.tokenize_path else None
        probe_text = self.corpus.window(seeded_rng(cfg.seed, "probe"), 400)
        reported = await probe_prompt_tokens(session, t, probe_text, self.headers, api_key_env=cfg.api_key_env,
                                             key_file=cfg.api_key_file)
        if self.counter:
            self.overhead_tokens = reported - (await self.counter([probe_text]))[0]
        else:
            self.chars_per_token = len(probe_text) / max(reported, 1)
        self.doc = {
            "schema": SCHEMA, "label": cfg.label, "run_id": self.run_id,
            "started_at": datetime.now(UTC).isoformat(), "loadgen_version": __version__,
            "anchor": {"mono_ns": self.anchor.mono_ns, "wall_ns": self.anchor.wall_ns},
            "args": cfg.public_args(), "target": t.as_dict(),
            "prompt_sizing": {"method": "tokenize" if self.counter else "probe-ratio",
                              "template_overhead_tokens": self.overhead_tokens},
            "cells": self.cells,
        }
        spec = t.spec_settings()
        log(f"target {t.url}  engine={t.engine}  model={t.model}  api={t.api}  fingerprint={t.fingerprint()}")
        if spec:
            log("speculative: " + "  ".join(f"{k.replace('speculative_', '')}={v}" for k, v in spec.items()))
        log(f"prompts: {'tokenize-exact' if self.counter else 'estimated from a probe (no /v1/tokenize)'}, "
            f"template overhead {self.overhead_tokens} tokens; run {self.run_id}")

    async def build_prompts(self, cell: CellKey, n: int) -> list[str]:
        cfg = self.cfg
        rng = seeded_rng(cfg.seed, cell.context_tokens, cell.concurrency, cell.request_rate)
        body_tokens = cell.context_tokens - self.overhead_tokens
        load = cell.concurrency if cell.request_rate is None else f"{cell.concurrency}r{cell.request_rate:g}"
        prefixes = [unique_prefix(self.run_id, cell.context_tokens, load, i) for i in range(n)]
        if self.counter is None:
            chars = int(body_tokens * self.chars_per_token)
            return [p + self.corpus.window(rng, chars)[: max(0, chars - len(p))] for p in prefixes]
        bodies = [self.corpus.window(rng, chars_for(body_tokens)) for _ in range(n)]
        texts, _ = await fit_prompts(prefixes, bodies, [body_tokens] * n, self.counter)
        return texts

    # ---- cells -----------------------------------------------------------------------------------------
    def cells_to_run(self) -> list[CellKey]:
        return [CellKey(ctx, c) for ctx in self.cfg.contexts for c in self.cfg.concurrency]

    def requests_for(self, cell: CellKey) -> int:
        """Measured requests of a cell (closed loop: --requests-per-cell or the default; open loop overrides)."""
        return self.cfg.requests_for(cell.concurrency)

    async def run_cell(self, session: aiohttp.ClientSession, cell: CellKey, factories, attempt: int = 0) -> dict:
        cfg = self.cfg
        n_measure = self.requests_for(cell)
        if cfg.duration_per_cell_s:
            n_measure = max(n_measure, 1_000_000)
        n_total = cfg.warmup + n_measure
        n_prompts = min(n_total, self.requests_for(cell) + cfg.warmup) if cfg.duration_per_cell_s \
            else n_total
        prompts = await self.build_prompts(cell, n_prompts)
        opts = RequestOptions(model=self.target.model, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                              ignore_eos=cfg.ignore_eos)
        bodies = [build_body(cfg.api, p, opts) for p in prompts]
        jobs = JobList(bodies, n_total, cfg.warmup)
        ccfg = ClientConfig(base_url=self.url, api=cfg.api, timeout_s=cfg.timeout_s,
                            idle_timeout_s=cfg.idle_timeout_s)
        measured: list[Record] = []

        def on_record(rec: Record) -> None:
            for s in self.sinks:
                s.record(rec)
            if rec.phase == "measure":
                measured.append(rec.compact())  # kept until the summary: per-chunk lists as machine ints
            self.progress.add(rec)

        def on_sent() -> None:
            for s in self.sinks:
                s.request_sent(cell)

        deadline = None
        if cfg.duration_per_cell_s:
            deadline = time.monotonic_ns() + int(cfg.duration_per_cell_s * 1e9)
        run = CellRun(self.run_id, cell, jobs, self.sender(session, ccfg), on_sent, on_record, deadline,
                      attempt=attempt)
        self.current = run
        await self.warm(session, cell, len(jobs))
        for s in self.sinks:
            s.cell_started(cell, self.run_id)
        self.progress.reset(cell.label(), n_total if not cfg.duration_per_cell_s else 0)
        if cfg.warmup and cell.request_rate is None:
            await self.warm_up(run, cell)
        sources = [f() for f in factories]
        monitor = LoopMonitor()
        monitor.start()
        for src in sources:
            await src.start()
        drawer = asyncio.create_task(self._draw())
        try:
            self.load = asyncio.ensure_future(self.drive(run, cell))
            # a second interrupt cancels the load (in-flight requests are recorded as cancelled); the cell is
            # still summarised and saved
            await asyncio.wait([self.load])
            if not self.load.cancelled():
                self.load.result()
        finally:
            drawer.cancel()
            self.progress.clear()
            results = [await src.stop() for src in sources]
        summary = summarize(measured)
        summary["client"] = await monitor.stop(summary["send_lateness_s"].get("p99")
                                               if cell.request_rate is not None else None)
        return self.assemble(cell, summary, results)

    async def warm_up(self, run: CellRun, cell: CellKey) -> None:
        """Closed loop: the warmup requests run to completion before the measured window (and its telemetry)
        opens, so server-side sources see only measured traffic."""
        measure = run.jobs[self.cfg.warmup:]
        run.jobs = run.jobs[:self.cfg.warmup]
        await closed_loop(run, cell.concurrency, self.pause)
        run.jobs, run.next_job = measure, 0

    async def warm(self, session: aiohttp.ClientSession, cell: CellKey, n_jobs: int) -> None:
        """Open the cell's connections before its load (loadgen.h1send warms its own pool instead)."""
        await warm_connections(session, self.url, cell.concurrency or n_jobs)

    def sender(self, session: aiohttp.ClientSession, ccfg: ClientConfig):
        """The measured request, `await sender(body, rec)` (loadgen.h1send replaces it with its lean path)."""
        return lambda body, rec: send(session, ccfg, body, rec)

    async def drive(self, run: CellRun, cell: CellKey) -> None:
        """The load pattern of a cell (closed loop here; open loop overrides)."""
        await closed_loop(run, cell.concurrency, self.pause)

    def assemble(self, cell: CellKey, summary: dict, results) -> dict:
        entry = cell.as_dict() | summary
        entry["accept_length"] = cell_telemetry.accept_length(summary, results)
        entry["power"] = cell_telemetry.power(results, summary["output_tokens"], summary["duration_s"])
        entry["telemetry"] = {r.name: {"available": r.available, "reason": r.reason, **r.values}
                              for r in results}
        entry["warnings"] = [w for r in results for w in r.warnings]
        failed = summary["requests"]["failed"]
        entry["status"] = "ok" if summary["requests"]["ok"] > 0 else "failed"
        entry["error"] = None if entry["status"] == "ok" else f"no request succeeded ({failed} failed)"
        return entry

    async def _draw(self) -> None:
        while True:
            self.progress.draw()
            await asyncio.sleep(0.5)

    def save(self) -> None:
        self.doc["cells"] = self.cells
        self.doc["updated_at"] = datetime.now(UTC).isoformat()
        write_json_atomic(self.results_path, self.doc)

    async def run(self) -> int:
        cfg = self.cfg
        headers = {}
        key = cfg.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.headers = headers
        ccfg = ClientConfig(base_url=self.url, api=cfg.api, timeout_s=cfg.timeout_s,
                            idle_timeout_s=cfg.idle_timeout_s, headers=headers)
        async with make_session(max(cfg.concurrency), ccfg) as session:
            await self.setup(session)
            factories = build_factories(cfg, self.target)
            self.save()
            log(header())
            for cell in self.cells_to_run():
                if self.stopping:
                    self.cells.append(cell.as_dict() | {"status": "skipped", "error": self.stop_reason})
                    continue
                try:
                    entry = await self.run_cell(session, cell, factories)
                except (TimeoutError, ServerError, aiohttp.ClientError) as exc:
                    # sizing the cell's prompts failed before any load: this cell fails, the run goes on
                    entry = cell.as_dict() | {"status": "failed", "error": f"before load: {exc}"[:300]}
                self.cells.append(entry)
                for s in self.sinks:
                    s.cell_finished(cell, entry)
                self.save()
                log(row(entry))
            if self.stopping:
                self.save()  # with the cells that were not measured, marked skipped
        for s in self.sinks:
            s.close()
        print(table(self.cells))
        print(f"results: {self.results_path}", file=sys.stderr)
        return 0 if all(c["status"] == "ok" for c in self.cells) else 1
