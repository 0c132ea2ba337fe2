"""The finished-cell gauges: one gauge per column of the terminal matrix, set from the cell's final summary.

Each gauge is labelled by the cell (run, concurrency, context_tokens, request_rate) and keeps its value until
the exporter stops, so a dashboard reads a finished cell with `last_over_time(…[$__range])` long after the
run, and the value is the results JSON's (the same typed cell, not a second formula).
"""

from __future__ import annotations

import math

from loadgen.results.cell_view import Cell, as_result, figure

# attribute -> (summary path, metric name, help); the order is the terminal matrix's (loadgen/report/table.py)
CELL_RESULTS: dict[str, tuple[str, str, str]] = {
    "ok_requests": ("requests.ok", "loadgen_cell_ok_requests", "Finished cell: requests that ended ok."),
    "failed_requests": ("requests.failed", "loadgen_cell_failed_requests",
                        "Finished cell: requests that ended in an error."),
    "cell_tok_s": ("output_tok_s", "loadgen_cell_output_tokens_per_second",
                   "Finished cell: aggregate output tokens/s (results JSON output_tok_s)."),
    "request_tok_s_mean": ("request_tok_s.mean", "loadgen_cell_request_output_tokens_per_second_mean",
                           "Finished cell: mean per-request decode rate (tokens/s)."),
    "request_tok_s_p10": ("request_tok_s.p10", "loadgen_cell_request_output_tokens_per_second_p10",
                          "Finished cell: 10th percentile of the per-request decode rate (tokens/s)."),
    "ttft_mean": ("ttft_s.mean", "loadgen_cell_ttft_mean_seconds", "Finished cell: mean TTFT."),
    "ttft_p50": ("ttft_s.p50", "loadgen_cell_ttft_p50_seconds", "Finished cell: median TTFT."),
    "ttft_p99": ("ttft_s.p99", "loadgen_cell_ttft_p99_seconds", "Finished cell: 99th percentile TTFT."),
    "prefill_tok_s": ("prefill_tok_s", "loadgen_cell_prefill_tokens_per_second",
                      "Finished cell: prefill throughput (prompt tokens/s)."),
    "e2e_mean": ("e2e_s.mean", "loadgen_cell_e2e_mean_seconds", "Finished cell: mean end-to-end latency."),
    "tokens_per_chunk": ("tokens_per_chunk_mean", "loadgen_cell_output_tokens_per_chunk",
                         "Finished cell: mean output tokens per content chunk."),
    "accept_length": ("accept_length.value", "loadgen_accept_length",
                      "Finished cell: accept length (best source)."),
    "gpu_power": ("power.mean_w_total", "loadgen_gpu_power_watts", "Finished cell: mean total GPU power."),
    "j_per_token": ("power.j_per_output_token", "loadgen_energy_per_output_token_joules",
                    "Finished cell: GPU energy per output token."),
    "tokens_per_j": ("power.output_tokens_per_j", "loadgen_output_tokens_per_joule",
                     "Finished cell: output tokens per joule."),
    "power_fraction": ("power.power_fraction_of_limit", "loadgen_cell_gpu_power_per_limit_ratio",
                       "Finished cell: mean GPU power as a fraction of the power limit."),
    "gpu_utilization": ("gpu_activity.total.utilization_percent", "loadgen_cell_gpu_utilization_percent",
                        "Finished cell: GPU utilization, mean over the window and the GPUs (%, as DCGM_FI_DEV_GPU_UTIL)."),
    "gpu_sm_clock": ("gpu_activity.total.sm_clock_fraction", "loadgen_cell_gpu_sm_clock_per_max_ratio",
                     "Finished cell: mean SM clock as a fraction of the GPUs' maximum."),
    "gpu_power_capped": ("gpu_activity.total.power_cap_fraction", "loadgen_cell_gpu_power_capped_ratio",
                         "Finished cell: share of the window the GPUs' clocks were held by the power cap."),
    "gpu_dram_active": ("gpu_activity.total.dram_active", "loadgen_cell_gpu_dram_active_ratio",
                        "Finished cell: mean DCGM_FI_PROF_DRAM_ACTIVE (memory interface busy)."),
    "gpu_tensor_active": ("gpu_activity.total.tensor_active", "loadgen_cell_gpu_tensor_active_ratio",
                          "Finished cell: mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (tensor pipes busy)."),
    "cell_loop_lag_p99": ("client.loop_lag_p99_s", "loadgen_cell_event_loop_lag_p99_seconds",
                          "Finished cell: p99 event-loop lag of the client."),
    "cell_saturated": ("client.saturated", "loadgen_cell_client_saturated",
                       "Finished cell: 1 when the client was saturated (its figures are invalid)."),
}


def summary_value(cell: Cell, path: str) -> float | None:
    """The cell's figure at path "a.b" (`cell_view.figure`) as a finite float; None when any step is missing,
    None or NaN. Booleans count as 0/1 (`client.saturated`)."""
    node = figure(as_result(cell), path)
    if isinstance(node, bool):
        return float(node)
    if not isinstance(node, (int, float)) or not math.isfinite(node):
        return None
    return float(node)


def per_gpu_limit_w(cell: Cell) -> tuple[float, str] | None:
    """(power limit per GPU in W, the telemetry source that read it) of a finished cell, or None."""
    result = as_result(cell)
    power = result.telemetry.power
    total = summary_value(result, "power.limit_w_total")
    gpus = summary_value(result, "power.gpus")
    if not power or total is None or not gpus or total <= 0:
        return None
    return total / gpus, str(power.get("source") or "telemetry")
