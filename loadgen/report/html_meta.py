"""The report's words around the numbers: what was measured where (metadata), the simulator banner, and
everything that went wrong (failed configurations and cells, with reasons and diagnostics)."""

from __future__ import annotations

import os
from typing import Any

from loadgen.files import read_json
from loadgen.names import ConfigStatus
from loadgen.report.compare import Run
from loadgen.report.html_build import el, key_values, text
from loadgen.report.html_tables import load_text, prompt_text
from loadgen.report.plot_axes import sim_note
from loadgen.results.cell_status import measured, problem
from loadgen.results.comparable import max_tokens, mismatches
from loadgen.results.schema import SWEEP_SCHEMA

DIAGNOSTICS_TAIL_CHARS = 6000

Sweep = tuple[dict[str, Any], str]  # a sweep.json document and its folder


def folder_documents(paths: list[str], name: str, schema: str) -> list[tuple[dict[str, Any], str]]:
    """(document, its folder) of every input that is a folder holding `name` of `schema`, or that file itself."""
    out = []
    for p in paths:
        f = os.path.join(p, name) if os.path.isdir(p) else p
        try:
            doc = read_json(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == schema:
            out.append((doc, os.path.dirname(os.path.abspath(f))))
    return out


def sweep_summaries(paths: list[str]) -> list[Sweep]:
    """(sweep.json document, its folder) of every input that is a sweep folder or sweep.json file."""
    return folder_documents(paths, "sweep.json", SWEEP_SCHEMA)


def _flat(value: object, prefix: str = "") -> list[tuple[str, str]]:
    """A nested dict as ("a.b", "value") pairs (lists joined), for key/value tables."""
    if isinstance(value, dict):
        return [kv for k, v in value.items() for kv in _flat(v, f"{prefix}{k}.")]
    if isinstance(value, list) and not any(isinstance(v, (dict, list)) for v in value):
        value = ", ".join(str(v) for v in value)
    return [(prefix.rstrip("."), "" if value is None else str(value))]


def _when(iso: str | None) -> str | None:
    """'2026-12-01T12:07:29.004678+00:00' → '2026-12-01 12:07:29 UTC' (results store UTC)."""
    if not iso or not iso.endswith("+00:00"):
        return iso
    return iso[:19].replace("T", " ") + " UTC"


def run_facts(run: Run) -> list[tuple[str, str]]:
    """What a reader needs to trust and reproduce one configuration's figures, as (label, text) pairs."""
    d, t, args = run.doc, run.doc.get("target") or {}, run.doc.get("args") or {}
    facts = [("label", d.get("label")), ("run id", d.get("run_id")), ("started", _when(d.get("started_at"))),
             ("updated", _when(d.get("updated_at"))), ("loadgen", d.get("loadgen_version")),
             ("target URL", t.get("url")), ("API", t.get("api")), ("engine", t.get("engine")),
             ("model", t.get("model")), ("server fingerprint", t.get("fingerprint")),
             ("max tokens", max_tokens(d)), ("requests per cell", args.get("requests_per_cell")),
             ("warm-up requests", args.get("warmup"))]
    walls = [w for c in run.cells.values() if (w := c.load.wall_clock) and w.get("start")]
    if walls:
        facts.append(("cells measured", f"{min(w['start'] for w in walls)} → {max(w['end'] for w in walls)}"))
    facts += [(f"parameter {k}", v) for k, v in run.params.items()]
    facts += [(f"speculative {k.removeprefix('speculative_')}", v) for k, v in (t.get("spec") or {}).items()]
    if (t.get("server_info") or {}).get("sim_speed") is not None:
        facts.append(("simulator speed", f"×{t['server_info']['sim_speed']:g}"))
    for section in ("environment", "host"):
        facts += [(f"{section} {k}", v) for k, v in _flat(d.get(section) or {})]
    return [(k, "" if v is None else str(v)) for k, v in facts if v not in (None, "")]


def metadata_section(runs: list[Run]) -> str:
    """Facts shared by every configuration once, then a table of the ones that differ, then each
    configuration's full server info (folded)."""
    facts = [dict(run_facts(r)) for r in runs]
    keys = list(dict.fromkeys(k for f in facts for k in f))
    common = [k for k in keys if len({f.get(k) for f in facts}) == 1 and all(k in f for f in facts)]
    varying = [k for k in keys if k not in common]
    out = [el("h3", "Common to every configuration"), key_values([(k, text(facts[0][k])) for k in common])]
    if varying and len(runs) > 1:
        head = el("thead", el("tr", el("th", "configuration") + "".join(el("th", text(k)) for k in varying)))
        body = "".join(el("tr", el("th", text(r.name), scope="row") + "".join(el("td", text(f.get(k, "")))
                                                                              for k in varying))
                       for r, f in zip(runs, facts))
        out += [el("h3", "Per configuration"), el("div", el("table", head + el("tbody", body), class_="data kv"),
                                                   class_="scroll")]
    for r in runs:
        info = (r.doc.get("target") or {}).get("server_info") or {}
        pairs = [(k, text(v)) for k, v in _flat(info)]
        out.append(el("details", el("summary", text(f"{r.name}: full server info ({len(pairs)} fields)"))
                      + key_values(pairs)))
    return "".join(out)


def mismatch_banner(runs: list[Run]) -> str:
    """The settings on which the runs differ (`comparable.mismatches`): their figures do not compare."""
    found = mismatches(runs)
    if not found:
        return ""
    items = "".join(el("li", text(line)) for line in found)
    return el("div", text("These runs measured different things; compare their figures with care:")
              + el("ul", items), class_="banner bad", role="note")


def sim_banner(runs: list[Run]) -> str:
    note = sim_note(runs)
    if not note:
        return ""
    return el("div", text(note + ". The simulator answers like an SGLang DDTree server; use these numbers to "
                          "check the tooling, not to choose a budget."), class_="banner sim", role="note")


def _diagnostics(run: Run) -> str:
    attempts = (run.doc.get("sweep") or {}).get("attempts") or []
    tails = [a.get("diagnostics") for a in attempts if a.get("diagnostics")]
    if not tails:
        return ""
    tail = tails[-1] if isinstance(tails[-1], str) else str(tails[-1])
    return el("details", el("summary", "diagnostics (last failure)") + el("pre", text(tail[-DIAGNOSTICS_TAIL_CHARS:])))


def _cell_problems(run: Run) -> list[str]:
    items = []
    for key, cell in sorted(run.cells.items()):
        why = problem(cell)
        if why:
            kept = " (measured: its figures are shown, marked, never best)" if measured(cell) else ""
            items.append(el("li", text(f"prompt {prompt_text(key[0])}, load {load_text(key)}: "
                                       f"{cell.status} — {why}{kept}"), data_config=run.name,
                            data_ctx=key[0], data_measured="yes" if measured(cell) else "no"))
    return items


def _unmeasured_configs(sweeps: list[Sweep], measured: set[str]) -> list[str]:
    items = []
    for doc, base in sweeps:
        for conf in doc.get("configs", []):
            if conf.get("name") in measured:
                continue
            diag = ""
            if conf.get("diagnostics") and os.path.exists(os.path.join(base, conf["diagnostics"])):
                with open(os.path.join(base, conf["diagnostics"]), encoding="utf-8", errors="replace") as fh:
                    tail = fh.read()[-DIAGNOSTICS_TAIL_CHARS:]
                diag = el("details", el("summary", "diagnostics") + el("pre", text(tail)))
            why = f": {conf.get('status')} — {conf.get('reason') or 'no reason recorded'}"
            items.append(el("li", el("strong", text(conf.get("name"))) + text(why) + diag, data_config=conf.get("name")))
    return items


def problems_section(runs: list[Run], sweeps: list[Sweep]) -> tuple[str, int]:
    """(HTML, number of problems): configurations that measured nothing, then each configuration's failed
    and skipped cells with their reasons and its diagnostics."""
    out, count = [], 0
    lost = _unmeasured_configs(sweeps, {r.name for r in runs if r.cells})
    if lost:
        out += [el("h3", "Configurations without results"), el("ul", "".join(lost))]
        count += len(lost)
    for r in (r for r in runs if r.cells):
        cells = _cell_problems(r)
        status = _sweep_status(r, sweeps)
        if cells or status not in (None, ConfigStatus.OK):
            out += [el("h3", text(f"{r.name}" + (f" ({status})" if status else ""))),
                    el("ul", "".join(cells) or el("li", "no cell failed")), _diagnostics(r)]
            count += len(cells)
    return "".join(out), count


def _sweep_status(run: Run, sweeps: list[Sweep]) -> str | None:
    for doc, _ in sweeps:
        for conf in doc.get("configs", []):
            if conf.get("name") == run.name:
                status: str | None = conf.get("status")
                return status
    return None
