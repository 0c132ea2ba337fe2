"""Running a sweep: for each configuration, reconfigure the server, pass the readiness gate, measure the
cells not yet measured, and record what happened — whatever happens, then go on to the next one.

A configuration is measured by the normal runner (every policy of a plain run: server going away,
interrupts, open loop, workers), built by the CLI's `RunBuilder` with the sweep's own results file (kept
cells, the "sweep" section, matrix order) and a check that the server still runs the configuration.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp

from loadgen.client.aiohttp_sender import make_session
from loadgen.client.config import ClientConfig
from loadgen.config import RunConfig
from loadgen.console import log
from loadgen.errors import UsageError
from loadgen.files import write_json_atomic
from loadgen.names import Api, CellStatus, ConfigStatus, MeasureFailure
from loadgen.record import CellKey
from loadgen.results.cell_result import CellResult
from loadgen.results.document import ResultsFile
from loadgen.results.findings import NOTHING, CellFindings, incident
from loadgen.results.incidents import IncidentKind
from loadgen.results.schema import RESULTS_SCHEMA
from loadgen.results.stored import kept_cells, ok_keys, prune_records, stored_cells
from loadgen.run.control import RunControl
from loadgen.run.runner import CellCheck, Runner
from loadgen.sinks.base import Sink
from loadgen.sinks.jsonl import JsonlSink
from loadgen.sweep import state
from loadgen.sweep.ready import reconfigure_and_wait, run_diagnostics
from loadgen.sweep.spec import Config, SweepSpec
from loadgen.sweep.summary import lock_dir, print_summary, write_summary
from loadgen.target.expect import expect_mismatches
from loadgen.target.identity import server_identity

INFO_TIMEOUT_S = 5.0


class RunBuilder(Protocol):
    """What the sweep needs from the command line: a run's configuration from its argv, and its runner."""

    def config(self, argv: list[str]) -> RunConfig: ...

    def runner(self, cfg: RunConfig, url: str, *, sinks: list[Sink], results: ResultsFile,
               checks: list[CellCheck]) -> Runner: ...


@dataclass
class Plan:
    cfg: Config
    paths: dict
    run_cfg: RunConfig
    doc: dict | None  # what is on disk (None with --force or when nothing is)


class ConfigurationCheck:
    """After a cell with failures: a server restarted under us (e.g. by its supervisor) may be another
    configuration; `expect` is checked against /server_info, and a mismatch fails the cell and stops the run.
    A server that is simply gone is the server-down policy's business."""

    def __init__(self, url: str, expect: dict, headers: dict):
        self.url, self.expect, self.headers = url, expect, headers

    async def check(self, session: aiohttp.ClientSession, result: CellResult, control: RunControl) -> CellFindings:
        failed = result.requests.requests.get("failed")
        if not failed:
            return NOTHING
        changed = await self.changed(session)
        if not changed:
            return NOTHING
        control.stop(f"not measured: {changed}")
        return incident(IncidentKind.CONFIGURATION_CHANGED, f"{changed} during the cell ({failed} requests failed)")

    async def changed(self, session: aiohttp.ClientSession) -> str | None:
        try:
            async with session.get(self.url + "/server_info", headers=self.headers,
                                   timeout=aiohttp.ClientTimeout(total=INFO_TIMEOUT_S)) as resp:
                info = await resp.json() if resp.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
            return None
        if not isinstance(info, dict):  # llama-server has no /server_info: its settings stand for it
            info = await server_identity(session, self.url, self.headers)
        wrong = expect_mismatches(info, self.expect) if isinstance(info, dict) else []
        return "the server changed configuration (" + "; ".join(wrong) + ")" if wrong else None


def _resume_note(name: str, kept: list[CellResult], order: list[CellKey]) -> None:
    if kept:
        done = ", ".join(c.key.label() for c in kept)
        log(f"[{name}] resuming: {len(kept)} of {len(order)} cells already measured, not measured again: {done}")


def _prepare_records(plan: Plan, force: bool) -> None:
    if force and os.path.exists(plan.paths["records"]):
        os.unlink(plan.paths["records"])
    dropped = prune_records(plan.paths["records"], kept_cells(plan.doc, None))
    if dropped:
        log(f"[{plan.cfg.name}] dropped {dropped} records of a cell that never finished")


async def run_config(spec: SweepSpec, plan: Plan, order: list[CellKey], force: bool, stop: StopSweep,
                     runs: RunBuilder) -> ConfigStatus:
    """Measure one configuration; returns its status. Never raises for server or command failures."""
    cfg, paths = plan.cfg, plan.paths
    kept = state.kept_of(plan.doc, order, plan.run_cfg.contexts if spec.search else None)
    info: dict[str, Any] = {"sweep": spec.name, "config": cfg.name, "params": cfg.params,
                            "settings": spec.settings(cfg),
                            "attempts": list(((plan.doc or {}).get("sweep") or {}).get("attempts", []))}
    if state.measured_all(plan.doc, kept, order, bool(spec.search), plan.run_cfg.contexts):
        log(f"[{cfg.name}] all {len(kept)} cells already measured: skipped (--force measures them again)")
        return ConfigStatus.OK
    _resume_note(cfg.name, kept, order)
    _prepare_records(plan, force)
    attempt: dict[str, Any] = {"started_at": datetime.now(UTC).isoformat(), "cells_before": len(kept)}
    info["attempts"].append(attempt)
    log(f"[{cfg.name}] reconfigure: {shlex.join(cfg.reconfigure)}")
    headers = plan.run_cfg.auth_headers()
    async with make_session(ClientConfig(base_url=cfg.url, api=Api(spec.api), headers=headers)) as session:
        reason = await reconfigure_and_wait(spec, cfg, session, paths["reconfigure"], headers, attempt)
    runner = None
    if reason is None:
        log(f"[{cfg.name}] {attempt['readiness']['reason']}")
        runner = _config_runner(plan, kept, order, info, headers, runs)
        failure, reason = await _measure(runner, cfg, stop)
        if failure is not None:
            attempt["failure"] = failure
    cells = runner.cells if runner is not None else stored_cells(plan.doc) if not force else []
    _save(plan, runner, cells, info)
    status = await _judge(spec, plan, order, cells, attempt, reason, stop)
    _save(plan, runner, cells, info)
    return status


def _config_runner(plan: Plan, kept: list[CellResult], order: list[CellKey], info: dict, headers: dict,
                   runs: RunBuilder) -> Runner:
    # finished cells outside the current matrix (a prompt length dropped from the file) stay in the results
    extra = [c for c in kept_cells(plan.doc, None) if c.key not in order and c.key not in {k.key for k in kept}]
    results = ResultsFile(plan.paths["results"], kept=kept + extra, sections={"sweep": info}, order=order)
    checks: list[CellCheck] = [ConfigurationCheck(plan.cfg.url, plan.cfg.expect, headers)] if plan.cfg.expect else []
    sink = JsonlSink(plan.paths["records"], append=True, label=plan.run_cfg.label)
    return runs.runner(plan.run_cfg, plan.cfg.url, sinks=[sink], results=results, checks=checks)


async def _judge(spec: SweepSpec, plan: Plan, order: list[CellKey], cells: list[CellResult], attempt: dict,
                 reason: str | None, stop: StopSweep) -> ConfigStatus:
    doc = state.load_doc(plan.paths["results"]) if spec.search else None
    status = state.config_status(cells, order, attempted=True, searched=doc if spec.search else None,
                                 contexts=plan.run_cfg.contexts)
    attempt.update(outcome=status, reason=reason, cells_after=len(ok_keys(cells)))
    if stop.signum is not None:
        attempt["interrupted_by"] = signal.Signals(stop.signum).name
    if status is not ConfigStatus.OK:
        reason = reason or "; ".join(f"{c.key.label()}: {c.error}" for c in cells
                                     if c.status is not CellStatus.OK) or "cells missing"
        attempt["reason"] = reason
        log(f"[{plan.cfg.name}] {status.upper()}: {reason}")
        if stop.signum is None:
            attempt["diagnostics"] = await run_diagnostics(spec, plan.cfg, plan.paths, reason)
    return status


def _save(plan: Plan, runner: Runner | None, cells: list[CellResult], info: dict) -> None:
    if runner is not None and runner.results.doc:
        runner.results.save()
        return
    doc = dict(plan.doc or {"schema": RESULTS_SCHEMA, "label": plan.cfg.name, "target": None})
    doc.update(cells=[c.to_json() for c in cells], sweep=info, updated_at=datetime.now(UTC).isoformat())
    write_json_atomic(plan.paths["results"], doc)


class StopSweep:
    """SIGINT/SIGTERM while reconfiguring or waiting: cancel the sweep at once (everything finished is on
    disk). During a measurement the run's own handlers (loadgen.run.interrupts) let the cell drain first and
    the run returns 128 + the signal; either way no further configuration starts."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.task: asyncio.Task | None = None

    def arm(self) -> None:
        """(Re-)install the handlers: a run removes its own, and with them ours, when it ends."""
        self.task = self.task or asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        if self.signum is None:
            self.signum = sig
            log(f"\n{signal.Signals(sig).name}: stopping the sweep; finished cells are saved, run it again "
                "to resume")
            assert self.task is not None  # armed: the handlers are installed by `arm`, which sets it
            self.task.cancel()

    def measured(self, rc: int | None) -> None:
        if rc is not None and rc >= 128 and self.signum is None:
            self.signum = rc - 128


async def _measure(runner: Runner, cfg: Config, stop: StopSweep) -> tuple[MeasureFailure | None, str | None]:
    """(why the measurement failed, its reason); (None, a reason) when an interrupt stopped it; (None, None)."""
    try:
        stop.measured(await runner.run())
        if stop.signum is not None:
            return None, f"interrupted by {signal.Signals(stop.signum).name}"
    except UsageError as exc:
        return MeasureFailure.COULD_NOT_START, f"measurement could not start: {exc}"
    except Exception as exc:  # noqa: BLE001 - one configuration's crash must not end the sweep
        traceback.print_exc()
        return MeasureFailure.CRASHED, f"measurement crashed: {type(exc).__name__}: {exc}"
    finally:
        for s in runner.parts.sinks:
            s.close()
        stop.arm()
    if runner.target is not None and cfg.expect:
        wrong = expect_mismatches(runner.target.server_info, cfg.expect)
        if wrong:
            return MeasureFailure.NOT_AS_EXPECTED, "the server measured does not match expect: " + "; ".join(wrong)
    return None, None


def plan_sweep(spec: SweepSpec, force: bool, only: list[str] | None, runs: RunBuilder) -> list[Plan]:
    """Validate every configuration's run arguments and stored results before anything runs."""
    names = [c.name for c in spec.configs]
    for n in only or []:
        if n not in names:
            raise UsageError(f"--only {n}: no such configuration; the sweep has {', '.join(names)}")
    plans = []
    for cfg in spec.configs:
        if only and cfg.name not in only:
            continue
        paths = state.paths(spec.out_dir, cfg.name)
        run_cfg = runs.config(spec.run_argv(cfg, paths["results"]))
        doc = None if force else state.load_doc(paths["results"])
        diff = state.settings_diff(doc, spec.settings(cfg)) if doc else []
        if diff:
            raise UsageError(f"{paths['results']} was measured with other settings ({'; '.join(diff)}); pass "
                             "--force to measure again, or --out-dir to keep both")
        plans.append(Plan(cfg, paths, run_cfg, doc))
    return plans


async def run_sweep(spec: SweepSpec, runs: RunBuilder, force: bool = False, only: list[str] | None = None) -> int:
    os.makedirs(spec.out_dir, exist_ok=True)
    lock = lock_dir(spec.out_dir)
    stop = StopSweep()
    stop.arm()
    try:
        plans = plan_sweep(spec, force, only, runs)
        order = list(plans[0].run_cfg.cells())
        summary = await _run_plans(spec, plans, order, force, stop, runs)
    finally:
        lock.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().remove_signal_handler(sig)
    print_summary(spec, summary)
    if stop.signum is not None:
        return 128 + stop.signum
    return 0 if all(c["status"] == ConfigStatus.OK for c in summary["configs"] if not only or c["name"] in only) \
        else 1


async def _run_plans(spec: SweepSpec, plans: list[Plan], order: list[CellKey], force: bool, stop: StopSweep,
                     runs: RunBuilder) -> dict:
    started = datetime.now(UTC).isoformat()
    log(f"sweep {spec.name}: {len(plans)} configurations × {len(order)} cells, results in {spec.out_dir}")
    if not any(c.expect for c in spec.configs):
        log("note: no [expect]: a configuration counts as ready only after the server is seen going away")
    write_summary(spec, order, started)
    try:
        for plan in plans:
            await run_config(spec, plan, order, force, stop, runs)
            write_summary(spec, order, started)
            if stop.signum is not None:
                break
    except asyncio.CancelledError:
        if stop.signum is None:
            raise
        task = asyncio.current_task()
        assert task is not None  # the sweep's own, which the signal cancelled
        task.uncancel()
    return write_summary(spec, order, started)
