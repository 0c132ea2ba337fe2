"""docs/results.md, generated from the result types: `python3 -m loadgen.results.schema_doc > docs/results.md`.

tests/test_results_schema.py checks that the file in the repository is what this prints and that every file
loadgen writes (a run, a sweep, a merge) holds only the fields described here.
"""

from __future__ import annotations

from dataclasses import fields

from loadgen.results.cell_result import JUDGED, KEY_FIELDS, PARTS, RESERVED, TYPED_RESERVED
from loadgen.results.correctness_part import Correctness
from loadgen.results.incidents import EFFECTS
from loadgen.results.schema import RESULTS_SCHEMA, TUNE_SCHEMA

DOCUMENT_FIELDS = {
    "schema": f"`{RESULTS_SCHEMA}`",
    "label": "the run's `--label`",
    "run_id": "the run's id (also on every record)",
    "started_at": "when the run started (ISO 8601 UTC)",
    "updated_at": "when the file was last replaced (after every cell)",
    "loadgen_version": "the version that wrote the file",
    "anchor": "{mono_ns, wall_ns}: one monotonic reading and the wall clock at the same moment",
    "args": "the run's settings (every flag, the API key never)",
    "target": "{url, api, engine, model, server_info, spec, fingerprint}: what the server is",
    "prompt_sizing": "how prompt lengths were made exact (the tokenizer endpoint, or estimated)",
    "cells": "one object per cell, below",
    "host": "{hostname, boot_id, pid}: whose monotonic clock the times are on",
    "environment": "Python, platform, CPUs, loadgen version, git commit",
    "shard": "{index, count}: this process's shard of the run (--shard)",
    "ray": "--ray: {address, placement, nodes [{node_id, host, ip, cpus}], parts [{worker, node_id, host, ip, cores, "
           "pid}], clock {node_id: {offset_ns, uncertainty_ns, exchanges}} (driver time = part time + offset), "
           "max_clock_uncertainty_ns, cells [{cell, parts}]: the parts that ran each cell} (docs/distributed.md)",
    "earlier_runs": "the runs whose cells a resumed file kept: run_id, started_at, updated_at",
    "sweep": "a sweep configuration's own part: sweep, config, params, settings, attempts",
    "merged_from": "`loadgen merge`: the shards' run ids, labels, hosts and clock offsets, and each shard's own `drift` "
                   "part (none stands for the merged run)",
    "verify": "--verify: what the reference says of itself {reference, prompts, max_tokens, answers, "
              "reference_garbage {reason: [prompt]} (those checks are off for those prompts), unstable [prompt] "
              "(two one-at-a-time answers differ: the noise floor; null when answered once), "
              "unstable_divergence_tokens {min, p50, n}} (docs/verify.md)",
    "drift": "the run's first cell measured again after the last (`--drift-check`; [drift.md](drift.md)): "
             "{drifted, factor (first output tok/s ÷ again: > 1 slower; null: the again measurement produced no "
             "token), sentence, cell (its key), first and again {output_tok_s, output_tok_s_interval, ttft_p50_s, "
             "ttft_p50_s_interval, ok_requests, run_id (again: `<run id>-control`, its records' id)}, moved "
             "(the figures beyond noise and by more than min_change: a note), min_change, drift_factor (drifted: a "
             "moved figure changed this many times or more)}; absent when the check was off or skipped",
    "search": "`loadgen search`: its settings (drift_check: the control probe measured again at the end; "
              "drift_every: also after every N probes, 0: at the end only), the SLO, and per prompt length the bracket "
              "found {met, missed, probes, ended, complete, met_parts, missed_parts, again, control_checks, drift, "
              "capped, caveats [{end (met | missed), load, kind (disagreed: the end's latest measurement disagreed "
              "with the one before it; client_saturated: a cell of it whose client fell behind), reason}]} "
              "(docs/search.md)",
    "tune": "`loadgen tune`: the configuration's parts {parts [{context_tokens, concurrency, request_rate, again, "
            "role (first: its first visit | again: a contender measured again | control: the control measured again), "
            "requests, why (why it was measured)}], stops [{context_tokens, concurrency, role, why (why no more was "
            "measured there in that visit)}], control [the control's first part and its part at the end judged as a "
            "drift control, one per load, as `drift` below]} (docs/tune.md)",
}
CELL_FIELDS = {
    "context_tokens": ("tokens", "the cell's prompt length (0 for a dataset's own lengths)"),
    "concurrency": ("requests", "closed loop: the slots; open loop: the in-flight cap (0 = none)"),
    "request_rate": ("requests/s", "open loop only: the cell's target rate"),
    "again": ("", "`loadgen search` and `loadgen tune` only: N for the same load measured again the N-th time (a "
                  "probe measured again, a tune's next part; absent: the first)"),
    "run_id": ("", "the run that measured the cell"),
    "status": ("", "ok | failed | skipped, judged from `incidents` (below)"),
    "error": ("", "why the cell failed or was skipped; null when ok"),
    "warnings": ("", "the cell's note: its incidents' notes, then its telemetry sources' warnings"),
    "incidents": ("", "[{kind, reason}]: everything that went wrong; the status is judged from them"),
    "slo": ("", "latency targets and goodput (`--slo`): the object below; absent without targets"),
    "correctness": ("", "--verify: output verification, its fields below (null without --verify)"),
}


VERDICT_FIELDS = {
    "context": "the load's prompt length (0: a dataset's own lengths)",
    "concurrency": "closed loop: the load's concurrency; null for a rate",
    "rate": "open loop: the load's request rate (requests/s); null for a concurrency",
    "objective": "output_tok_s | request_tok_s | ttft_p50_s | good_tok_s | j_per_token",
    "decision": "wins | tied (no leader beyond noise and the resolution) | alone (one eligible configuration) | "
                "none (no eligible configuration has the figure)",
    "winner": "the configuration that wins (or is alone); null when tied",
    "tied": "with tied: the leader and every configuration it does not beat, the leader first; else []",
    "tie_reason": "with tied: `within noise` (a tied margin's interval reaches 0) or `below the resolution`",
    "runner_up": "the configuration the margin is taken against: the best beaten one, or the second of a tie",
    "margin": "how much better the leader is than the runner-up, a fraction ≥ 0: leader/runner − 1 (higher is "
              "better) or runner/leader − 1 (lower is better)",
    "margin_interval": "[low, high]: its 95 % interval (definitions.md#verdict); null without intervals",
    "estimates": "[{config, value, interval, measurements}]: each eligible configuration's figure, best first "
                 "(measurements: each result's value where it was measured more than once)",
    "ineligible": "[{config, reason}]: configurations that could not compete at this load (not measured, a failed "
                  "check, a saturated client, cut short)",
    "between_runs": "{relative_se, controls}: the noise between runs from the drift controls, s = √(Σ ln(first/"
                    "again)² / 2n) over n controls, added to every one-measurement interval; null se without one",
    "ahead_of_rest": "with tied: {config, margin, margin_interval}: the leader's margin over the best configuration "
                     "it beats (how far the tie is ahead of the rest); else null",
    "why": "output tok/s, per-request tok/s and goodput only (null for TTFT, J/token, and without a runner-up); else {leader, runner_up, configs {name: {output_tok_s, accept_length, "
           "accept_source, verify_steps_per_s, step_ms, full_draft_share, draft_positions, "
           "power_fraction_of_limit, bottleneck}}, accept_ratio, steps_ratio, net_ratio (leader / runner-up: "
           "net = accept × steps), limit (what limits the leader's accept length: the draft's size | the drafter | "
           "both | not reported | no draft), confounders [\"setting: x for a; y for b\"], tied (the two "
           "within noise: no side outweighs), text} (definitions.md#verdict-why)",
}


TUNE_FIELDS = {
    "schema": f"`{TUNE_SCHEMA}`",
    "name, file, source": "the tune file's name, path and text",
    "started_at, updated_at": "when the tune started (its first run) and when this file was last written (ISO 8601)",
    "complete": "every phase went through (false: interrupted, or stopped by the budget: `stopped`)",
    "stopped": "why the tune stopped measuring before its end (`max_cells 40 reached`), or null",
    "objective, resolution": "what the answer is judged on and the smallest margin that ranks (the verdict's)",
    "settings": "the `[tune]` table with its defaults: {objective, resolution, max_cells, max_gpu_minutes, "
                "first_part, rounds}",
    "matrix": "the file's `[matrix]`",
    "loads": "[{context, concurrency, rate, requests_per_cell}]: the loads the answer is wanted at, in matrix order",
    "answers": "one per load, in `loads` order: the verdict's entry (above) over the feasible configurations, the "
               "infeasible and unmeasured ones among its `ineligible`, with `ranking` [{config, value, loss (the "
               "leader's margin over it), loss_interval, beaten}] (every other eligible configuration, best first), "
               "`contenders` (a tie not settled at the resolution that another round could move: who it would "
               "measure; [] when decided or settled), `settled` (decided, or tied within ±resolution) and "
               "`beyond_reach` (a tie not settled that one more round of parts could not move: its set; the tune "
               "declares it tied within noise rather than measure it)",
    "infeasible": "[{name, reason, sentence, context, concurrency, rate (where it failed; null: it never came up), "
                  "diagnostics_tail (the diagnostics command's last lines)}]",
    "cells_measured": "cells measured (every part counts, failed ones too)",
    "requests_measured": "their measured requests, whatever the outcome (warmups left out)",
    "restarts": "visits that ran the reconfigure command",
    "gpu_minutes": "Σ of every visit's wall time: the restart, the readiness wait and its cells",
    "grid": "{restarts, cells, requests, gpu_minutes_estimate}: the full grid at the same requests per cell (every "
            "configuration at every load, what `loadgen sweep` measures on the same file); the estimate: its restarts "
            "at this tune's mean readiness wait and its requests at this tune's seconds per request at each load",
    "configs": "[{name, params, status (measured | infeasible | not measured), visits, cells, requests, results}]",
    "visits": "[{config, phase (first | end N), started_at, wall_s, ready_s, restarted, status (ok | partial | "
              "failed | interrupted | done: nothing was left), parts, reason}]: every visit in order",
}


def _row(name: str, unit: str, text: str) -> str:
    return f"| `{name}` | {unit} | {text} |"


def _reserved_sections() -> list[str]:
    """The typed parts under a key of their own: correctness's fields by their names, the others' by their paths."""
    lines = ["", f"### correctness: {(Correctness.__doc__ or '').strip()}", "",
             "One object under the cell's `correctness` key.", "", "| field | unit | meaning |", "|---|---|---|"]
    lines += [_row(f.name, f.metadata["unit"], f.metadata["doc"]) for f in fields(Correctness)]
    for part, cls in TYPED_RESERVED.items():
        if cls is Correctness:
            continue
        lines += ["", f"### {part} (one object): {(cls.__doc__ or '').strip()}", "", "| field | unit | meaning |",
                  "|---|---|---|"]
        lines += [_row(f"{part}.{f.name}", f.metadata["unit"], f.metadata["doc"]) for f in fields(cls)]
    return lines


def render() -> str:
    """The whole of docs/results.md."""
    lines = ["# The results file", "",
             f"`--out FILE.json` (schema `{RESULTS_SCHEMA}`), replaced atomically after every cell. Generated from",
             "`loadgen/results/cell_result.py` by `python3 -m loadgen.results.schema_doc`; formulas are in",
             "[definitions.md](definitions.md). Times are seconds unless a name ends in `_ns` (monotonic ns).", "",
             "## The document", "", "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in DOCUMENT_FIELDS.items()]
    lines += ["", "## A cell", "",
              "A cell's object is flat: the key, the parts' fields, the verdict. Fields of one kind of load",
              "(open loop, ramps, the request-rate ceiling, retries after a server went away, merged shards)",
              "appear only in cells of that kind; a cell that was never measured holds its key and verdict.", "",
              "| field | unit | meaning |", "|---|---|---|"]
    lines += [_row(k, *CELL_FIELDS[k]) for k in (*KEY_FIELDS, "run_id", *JUDGED, *RESERVED)]
    for part, cls in PARTS.items():
        lines += ["", f"### {part}: {(cls.__doc__ or '').strip()}", "", "| field | unit | meaning |", "|---|---|---|"]
        lines += [_row(f.name, f.metadata["unit"], f.metadata["doc"]) for f in fields(cls)]
    lines += _reserved_sections()
    lines += ["", "## Incidents", "", "skip: not measured; fail: the measurement failed (its figures are not used); "
              "check: measured, and a check failed it (the cell fails; its figures are shown, marked, never best); "
              "note: a note beside the figures.", "", "| kind | effect on the cell |", "|---|---|"]
    lines += [f"| `{kind}` | {effect} |" for kind, effect in EFFECTS.items()]
    lines += ["", "## The verdict across configurations", "",
              "`verdict[]` in a sweep's `sweep.json` and in `loadgen compare --format json` (schema "
              "`loadgen.compare/v1`: {schema, configurations, resolution, verdict, rows}): one entry per load and "
              "objective (`loadgen/results/verdict.py`).", "", "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in VERDICT_FIELDS.items()]
    lines += ["", "## The tune", "",
              f"`tune.json` in a tune's folder (schema `{TUNE_SCHEMA}`; `loadgen/tune/result.py`, docs/tune.md), "
              "written after every visit; each configuration's results beside it, as a sweep's.", "",
              "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in TUNE_FIELDS.items()]
    return "\n".join(lines) + "\n"


def documented_cell_fields() -> set[str]:
    return set(CELL_FIELDS) | {f.name for cls in PARTS.values() for f in fields(cls)}


if __name__ == "__main__":
    print(render(), end="")
