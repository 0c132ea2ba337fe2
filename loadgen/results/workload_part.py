"""The `workload` part of a cell's result (`cell_result.CellResult.workload`): figures of the workload's
scenarios (sessions, shared prefixes, requests closed on purpose) and of the answers' kind (reasoning,
acceptance by draft position)."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.results import figures as fig
from loadgen.results.fields_doc import doc
from loadgen.results.figures import Figures


@dataclass
class Workload:
    """Figures of the workload's own shape and the answers' kind: requests closed on purpose, multi-turn
    sessions, shared prefixes, reasoning, acceptance by draft position."""

    cancellation: fig.Cancellation | None = doc("--cancel-fraction: {abandoned, abandoned_fraction, "
                                                "tokens_before_close {mean, p50, max}, close_after_s {mean, p50, "
                                                "max}} over the requests the client closed on purpose (outcome "
                                                "abandoned; definitions.md#cancellation)", optional=True)
    sessions: fig.Sessions | None = doc("--sessions: {sessions, turns_mean, turns_max, ok_fraction} "
                                        "(definitions.md#sessions)", optional=True)
    shared_prefix: fig.SharedPrefix | None = doc("--shared-prefix: {groups, tokens, cacheable_tokens, "
                                                 "cacheable_fraction, cached_tokens, cached_of_cacheable}: what a "
                                                 "prefix cache could serve and what it did "
                                                 "(definitions.md#shared-prefix)", optional=True)
    reasoning: Figures | None = doc("reasoning models: {requests, time_to_first_reasoning_s, time_to_first_answer_s, "
                                    "reasoning_tokens, reasoning_share} over ok requests with reasoning deltas "
                                    "(definitions.md#reasoning)", "s, tokens", optional=True)
    accept_by_position: list | None = doc("[{position, rate, conditional}]: the share of verify steps whose draft "
                                          "token at each position was accepted, and the chance given the one "
                                          "before (vLLM's per-position counters, else SGLang's per-request "
                                          "spec_correct_drafts_histogram; "
                                          "definitions.md#acceptance-by-draft-position)", optional=True)
    by_turn: list | None = doc("--sessions: per turn index k: {turn, requests, ok, ttft_s {mean, p50, p90}, "
                               "prompt_tokens_mean, cached_tokens, cached_fraction} over the turns k that ended ok",
                               optional=True)
