"""Running a sweep: for each configuration, reconfigure the server, pass the readiness gate, measure the
cells not yet measured, and record what happened — whatever happens, then go on to the next one."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shlex
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp

from loadgen.client import ClientConfig, make_session
from loadgen.config import RunConfig
from loadgen.errors import UsageError
from loadgen.files import write_json_atomic
from loadgen.readiness import ReadyResult, expect_mismatches, wait_ready
from loadgen.runner import SCHEMA, Runner, log
from loadgen.sinks.jsonl import JsonlSink
from loadgen.sweep import state
from loadgen.sweep.command import CommandResult, last_line, read_tail, run_command
from loadgen.sweep.spec import Config, SweepSpec

PROGRESS_EVERY_S = 15.0


@dataclass
class Plan:
    cfg: Config
    paths: dict
    run_cfg: RunConfig
    doc: dict | None  # what is on disk (None with --force or when nothing is)


class ConfigRunner(Runner):
    """The normal runner (with every runner plug-in: server-down policy, interrupts, open loop), for one
    configuration of a sweep: it measures only the cells not yet finished, stamps each cell with its run id,
    saves the sweep section with the results, and stops when the server changes configuration mid-matrix."""

    def __init__(self, cfg: RunConfig, url: str, sinks, results_path: str, kept: list[dict],
                 order: list[tuple[int, int]], info: dict, expect: dict, headers: dict):
        super().__init__(cfg, url, sinks, results_path)
        self.cells = list(kept)
        self.kept_keys = {state.cell_key(c) for c in kept}
        self.order = order
        self.info = info
        self.expect = expect
        self.auth_headers = headers

    def cells_to_run(self):
        return [c for c in super().cells_to_run() if (c.context_tokens, c.concurrency) not in self.kept_keys]

    async def run_cell(self, session, cell, factories, attempt: int = 0) -> dict:
        # `attempt` only when set, so this also runs on a Runner without the server-down plug-in's retries
        entry = await super().run_cell(session, cell, factories, **({"attempt": attempt} if attempt else {}))
        entry["run_id"] = self.run_id
        if entry["requests"]["failed"] and self.expect:
            changed = await self._server_changed(session)
            if changed:
                entry["status"] = "failed"
                entry["error"] = f"{changed} during the cell ({entry['requests']['failed']} requests failed)"
                self.stopping = True
                self.stop_reason = f"not measured: {changed}"
        return entry

    async def _server_changed(self, session) -> str | None:
        """A server restarted under us (e.g. by its supervisor) may be another configuration: check `expect`.
        A server that is simply gone is the server-down policy's business (loadgen.server_down)."""
        try:
            async with session.get(self.url + "/server_info", headers=self.auth_headers,
                                   timeout=aiohttp.ClientTimeout(total=5)) as resp:
                info = await resp.json() if resp.status == 200 else None
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
            return None
        wrong = expect_mismatches(info, self.expect) if isinstance(info, dict) else []
        return "the server changed configuration (" + "; ".join(wrong) + ")" if wrong else None

    def save(self) -> None:
        rank = {k: i for i, k in enumerate(self.order)}
        self.cells.sort(key=lambda c: rank.get(state.cell_key(c), len(rank)))
        self.doc["sweep"] = self.info
        super().save()


class WaitProgress:
    """Progress while a configuration is not ready yet: elapsed time, the gate's state, and the last line
    the reconfigure command printed. On a terminal one line is redrawn; otherwise a line is printed when the
    state changes and every 15 s."""

    def __init__(self, name: str, timeout_s: float, log_path: str):
        self.name, self.timeout_s, self.log_path = name, timeout_s, log_path
        self.tty = sys.stderr.isatty()
        self.last_state = ""
        self.last_print = 0.0
        self.reconf: asyncio.Task | None = None
        self.log_start = 0

    def __call__(self, elapsed_s: float, gate_state: str) -> None:
        line = f"  [{self.name}] waiting {elapsed_s:5.1f} s of {self.timeout_s:g} s: {gate_state}"
        if self.reconf is not None and not self.reconf.done():
            tail = read_tail(self.log_path, self.log_start, 2048)
            out = last_line("\n".join(ln for ln in tail.splitlines() if not ln.startswith("==== ")), 60)
            line += "; reconfigure running" + (f" ({out})" if out else "")
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if gate_state == "ready":
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif gate_state != self.last_state or now - self.last_print >= PROGRESS_EVERY_S:
            log(line)
            self.last_print = now
        self.last_state = gate_state

    def close(self) -> None:
        """End a redrawn line that did not end in "ready", so the next message starts on its own line."""
        if self.tty and self.last_state and self.last_state != "ready":
            sys.stderr.write("\n")


async def reconfigure_and_wait(spec: SweepSpec, cfg: Config, session, log_path: str, headers: dict,
                               attempt: dict) -> str | None:
    """Run the reconfigure command while the readiness gate watches the server. None when ready, else why
    not. The attempt dict gets the command's and the gate's results."""
    r = spec.readiness
    progress = WaitProgress(cfg.name, cfg.timeout_s, log_path)
    progress.log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    reconf_timeout_s = r.reconfigure_timeout_s or cfg.timeout_s
    reconf = asyncio.create_task(run_command(cfg.reconfigure, log_path, reconf_timeout_s,
                                             f"reconfigure {cfg.name}"))
    progress.reconf = reconf
    gate = asyncio.create_task(wait_ready(
        session, cfg.url, spec.api, spec.model, timeout_s=cfg.timeout_s, poll_s=r.poll_s,
        successes=r.successes, expect=cfg.expect or None, after=reconf, progress=progress, headers=headers,
        request_timeout_s=r.request_timeout_s))
    try:
        await asyncio.wait({reconf, gate}, return_when=asyncio.FIRST_COMPLETED)
        if reconf.done() and not reconf.result().ok:
            gate.cancel()
            cmd: CommandResult = reconf.result()
            attempt["reconfigure"] = cmd.as_dict()
            return f"reconfigure failed: {cmd.failure()}"
        ready: ReadyResult = await gate
        attempt["readiness"] = ready.as_dict()
        if not reconf.done():
            reconf.cancel()
            attempt["reconfigure"] = {"argv": cfg.reconfigure, "rc": None, "timed_out": True,
                                      "error": "still running when the readiness gate gave up (killed)"}
        else:
            attempt["reconfigure"] = reconf.result().as_dict()
        return None if ready.ready else ready.reason
    finally:
        progress.close()
        for task in (reconf, gate):
            if not task.done():
                task.cancel()
                # already leaving (failed or interrupted): the first error is the one to report
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


async def run_diagnostics(spec: SweepSpec, cfg: Config, paths: dict, reason: str) -> dict | None:
    if not cfg.diagnostics:
        return None
    res = await run_command(cfg.diagnostics, paths["diagnostics"], spec.readiness.diagnostics_timeout_s,
                            f"diagnostics {cfg.name} ({reason})")
    log(f"  [{cfg.name}] diagnostics ({'exit ' + str(res.rc) if res.rc is not None else res.failure()}) "
        f"saved to {paths['diagnostics']}")
    return res.as_dict()


async def run_config(spec: SweepSpec, plan: Plan, order: list[tuple[int, int]], force: bool,
                     stop: StopSweep) -> str:
    """Measure one configuration; returns its status. Never raises for server or command failures."""
    cfg, paths = plan.cfg, plan.paths
    kept = state.finished_cells(plan.doc, order)
    info = {"sweep": spec.name, "config": cfg.name, "params": cfg.params, "settings": spec.settings(cfg),
            "attempts": list(((plan.doc or {}).get("sweep") or {}).get("attempts", []))}
    if len(kept) == len(order):
        log(f"[{cfg.name}] all {len(order)} cells already measured: skipped (--force measures them again)")
        return "ok"
    if kept:
        done = ", ".join(f"ctx={c['context_tokens']} c={c['concurrency']}" for c in kept)
        log(f"[{cfg.name}] resuming: {len(kept)} of {len(order)} cells already measured, "
            f"not measured again: {done}")
    if force and os.path.exists(paths["records"]):
        os.unlink(paths["records"])
    dropped = state.prune_records(paths["records"], state.finished_cells(plan.doc, None))
    if dropped:
        log(f"[{cfg.name}] dropped {dropped} records of a cell that never finished")
    attempt = {"started_at": datetime.now(UTC).isoformat(), "cells_before": len(kept)}
    info["attempts"].append(attempt)
    log(f"[{cfg.name}] reconfigure: {shlex.join(cfg.reconfigure)}")
    headers = _auth(plan.run_cfg)
    async with make_session(1, ClientConfig(base_url=cfg.url, api=spec.api, headers=headers)) as session:
        reason = await reconfigure_and_wait(spec, cfg, session, paths["reconfigure"], headers, attempt)
    runner = None
    if reason is None:
        log(f"[{cfg.name}] {attempt['readiness']['reason']}")
        # finished cells outside the current matrix (a prompt length dropped from the file) stay in the
        # results
        extra = [c for c in state.finished_cells(plan.doc, None) if state.cell_key(c) not in order]
        sinks = [JsonlSink(paths["records"], append=True)]
        runner = ConfigRunner(plan.run_cfg, cfg.url, sinks, paths["results"], kept + extra, order, info,
                              cfg.expect, headers)
        reason = await _measure(runner, cfg, stop)
    cells = runner.cells if runner is not None else (plan.doc or {}).get("cells", []) if not force else []
    status = state.config_status(cells, order, attempted=True)
    attempt.update(outcome=status, reason=reason, cells_after=sum(c.get("status") == "ok" for c in cells))
    if status != "ok":
        reason = reason or "; ".join(f"ctx={c['context_tokens']} c={c['concurrency']}: {c.get('error')}"
                                     for c in cells if c.get("status") != "ok") or "cells missing"
        attempt["reason"] = reason
        log(f"[{cfg.name}] {status.upper()}: {reason}")
        if stop.signum is None:
            attempt["diagnostics"] = await run_diagnostics(spec, cfg, paths, reason)
    if runner is not None and runner.doc:
        runner.save()
    else:
        doc = dict(plan.doc or {"schema": SCHEMA, "label": cfg.name, "target": None})
        doc.update(cells=cells, sweep=info, updated_at=datetime.now(UTC).isoformat())
        write_json_atomic(paths["results"], doc)
    return status


class StopSweep:
    """SIGINT/SIGTERM while reconfiguring or waiting: cancel the sweep at once (everything finished is on
    disk). During a measurement the run's own handlers (loadgen.interrupts) let the cell drain first and the
    run returns 128 + the signal; either way no further configuration starts."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.task: asyncio.Task | None = None

    def arm(self) -> None:
        """(Re-)install the handlers: a run's plug-ins remove theirs, and with them ours, when it ends."""
        self.task = self.task or asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        if self.signum is None:
            self.signum = sig
            log(f"\n{signal.Signals(sig).name}: stopping the sweep; finished cells are saved, run it again "
                "to resume")
            self.task.cancel()

    def measured(self, rc: int | None) -> None:
        if rc is not None and rc >= 128 and self.signum is None:
            self.signum = rc - 128


async def _measure(runner: ConfigRunner, cfg: Config, stop: StopSweep) -> str | None:
    from loadgen.cli import RUNNER_HOOKS
    for hook in RUNNER_HOOKS:
        hook(runner)
    try:
        stop.measured(await runner.run())
        if stop.signum is not None:
            return f"interrupted by {signal.Signals(stop.signum).name}"
    except UsageError as exc:
        return f"measurement could not start: {exc}"
    except Exception as exc:  # noqa: BLE001 - one configuration's crash must not end the sweep
        traceback.print_exc()
        return f"measurement crashed: {type(exc).__name__}: {exc}"
    finally:
        for s in runner.sinks:
            s.close()
        stop.arm()
    if runner.target is not None and cfg.expect:
        wrong = expect_mismatches(runner.target.server_info, cfg.expect)
        if wrong:
            return "the server measured does not match expect: " + "; ".join(wrong)
    return None


def _auth(run_cfg: RunConfig) -> dict:
    key = run_cfg.api_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def plan_sweep(spec: SweepSpec, force: bool, only: list[str] | None) -> list[Plan]:
    """Validate every configuration's run arguments and stored results before anything runs."""
    from loadgen.cli import config_from_args, run_parser
    names = [c.name for c in spec.configs]
    for n in only or []:
        if n not in names:
            raise UsageError(f"--only {n}: no such configuration; the sweep has {', '.join(names)}")
    plans = []
    for cfg in spec.configs:
        if only and cfg.name not in only:
            continue
        paths = state.paths(spec.out_dir, cfg.name)
        argv = spec.run_argv(cfg, paths["results"])
        try:
            args, unknown = run_parser().parse_known_args(argv)
        except SystemExit:
            raise UsageError(f"{spec.path} [matrix] args: rejected by the run options (see the message "
                             "above)") from None
        if unknown:
            raise UsageError(f"{spec.path} [matrix] args: unknown option(s) {' '.join(unknown)}; "
                             "see loadgen --help")
        run_cfg = config_from_args(args)
        doc = None if force else state.load_doc(paths["results"])
        diff = state.settings_diff(doc, spec.settings(cfg)) if doc else []
        if diff:
            raise UsageError(f"{paths['results']} was measured with other settings ({'; '.join(diff)}); pass "
                             "--force to measure again, or --out-dir to keep both")
        plans.append(Plan(cfg, paths, run_cfg, doc))
    return plans


def lock_dir(out_dir: str):
    fh = open(os.path.join(out_dir, ".lock"), "a+")  # noqa: SIM115 - held open: the lock lives as long as it
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise UsageError(f"another sweep is writing to {out_dir}; wait for it to end or choose another "
                         "--out-dir") from None
    return fh


def write_summary(spec: SweepSpec, order: list[tuple[int, int]], started_at: str) -> dict:
    configs = []
    for cfg in spec.configs:
        paths = state.paths(spec.out_dir, cfg.name)
        doc = state.load_doc(paths["results"]) or {}
        attempts = (doc.get("sweep") or {}).get("attempts", [])
        cells = doc.get("cells", [])
        last = attempts[-1] if attempts else {}
        ready = (last.get("readiness") or {})
        configs.append({
            "name": cfg.name, "params": cfg.params,
            "status": state.config_status(cells, order, attempted=bool(attempts)),
            "reason": last.get("reason"), "cells_ok": sum(c.get("status") == "ok" for c in cells),
            "cells_total": len(order), "attempts": len(attempts), "ready_s": ready.get("elapsed_s"),
            "results": os.path.basename(paths["results"]), "records": os.path.basename(paths["records"]),
            "diagnostics": (os.path.basename(paths["diagnostics"]) if os.path.exists(paths["diagnostics"])
                            else None),
        })
    summary = {"schema": state.SWEEP_SCHEMA, "name": spec.name, "file": os.path.abspath(spec.path),
               "source": spec.text, "started_at": started_at,
               "updated_at": datetime.now(UTC).isoformat(), "matrix": spec.matrix, "configs": configs}
    write_json_atomic(os.path.join(spec.out_dir, "sweep.json"), summary)
    return summary


async def run_sweep(spec: SweepSpec, force: bool = False, only: list[str] | None = None) -> int:
    os.makedirs(spec.out_dir, exist_ok=True)
    lock = lock_dir(spec.out_dir)
    stop = StopSweep()
    stop.arm()
    try:
        plans = plan_sweep(spec, force, only)
        order = [(ctx, c) for ctx in plans[0].run_cfg.contexts for c in plans[0].run_cfg.concurrency]
        started = datetime.now(UTC).isoformat()
        log(f"sweep {spec.name}: {len(plans)} configurations × {len(order)} cells, results in {spec.out_dir}")
        if not any(c.expect for c in spec.configs):
            log("note: no [expect]: a configuration counts as ready only after the server is seen going away")
        write_summary(spec, order, started)
        try:
            for plan in plans:
                await run_config(spec, plan, order, force, stop)
                write_summary(spec, order, started)
                if stop.signum is not None:
                    break
        except asyncio.CancelledError:
            if stop.signum is None:
                raise
            asyncio.current_task().uncancel()
        summary = write_summary(spec, order, started)
    finally:
        lock.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().remove_signal_handler(sig)
    _print_summary(spec, summary)
    if stop.signum is not None:
        return 128 + stop.signum
    return 0 if all(c["status"] == "ok" for c in summary["configs"] if not only or c["name"] in only) else 1


def _print_summary(spec: SweepSpec, summary: dict) -> None:
    from loadgen.compare import compare_table, load_inputs
    print(f"\nsweep {spec.name} ({spec.out_dir}):")
    for c in summary["configs"]:
        note = f"  {c['reason']}" if c["status"] != "ok" and c["reason"] else ""
        print(f"  {c['name']:<20} {c['status']:<8} {c['cells_ok']}/{c['cells_total']} cells{note}")
    runs = load_inputs([spec.out_dir])
    if any(r.cells for r in runs):
        print()
        print(compare_table(runs, baseline=None))
