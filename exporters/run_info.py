"""The label values of `loadgen_run_info`: which run this is, under which label, against what.

Dashboards select runs by `label` (a run id says nothing to a reader) and the throughput baseline is keyed by
these labels, so runs of different models or speculative settings never share one.
"""

from __future__ import annotations

from exporters.live_metrics import RUN_INFO_LABELS, SPEC_INFO_KEYS


def run_info_labels(run: str, label: str, target: dict) -> tuple[str, ...]:
    """Values in `RUN_INFO_LABELS` order; what the target did not report is "" (Prometheus drops it)."""
    info = target.get("server_info") or {}
    values = {"run": run, "label": label, "model": str(target.get("model") or ""),
              "engine": str(target.get("engine") or ""), "fingerprint": str(target.get("fingerprint") or "")}
    for name, key in SPEC_INFO_KEYS.items():
        value = info.get(key)
        values[name] = "" if value is None else str(value)
    return tuple(values[name] for name in RUN_INFO_LABELS)
