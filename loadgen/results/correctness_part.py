"""The `correctness` part of a cell's result (`--verify`): its fields with their meaning.

Filled by `build_cell` from `results.correctness.correctness_part`; written as the cell's `correctness` object and
read back into this type. The formulas are in `loadgen.metrics.correctness`.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.results.fields_doc import KeyedPart, doc
from loadgen.results.figures import Figures


@dataclass
class Correctness(KeyedPart):
    """Output verification (--verify): the cell's verification requests against the reference."""

    mode: str | None = doc("garbage (only garbage fails the cell) | exact (any difference fails it)")
    reference: str | None = doc("what the outputs were compared with: run_start (the prompts answered one at "
                                "a time before the first cell), file:PATH, or config:NAME (a sweep's)")
    max_tokens: int | None = doc("max tokens of every verification request", "tokens")
    checked: int | None = doc("verification requests that ended ok (each judged once)", "requests")
    failed: int | None = doc("verification requests that did not end ok (not judged)", "requests")
    unit: str | None = doc("what positions count: ids (token ids), logprobs (token strings), text (pieces of "
                           "the text, positions carried over to tokens)")
    exact_match_fraction: float | None = doc("outputs identical to the reference / checked", "fraction")
    diverged: int | None = doc("outputs that differ from the reference", "requests")
    first_divergence_tokens: Figures | None = doc("{min, p50, n}: first differing position, in the server's "
                                                  "tokens, over the outputs that differ", "tokens")
    garbage_fraction: float | None = doc("garbage outputs / checked, each judged against its reference output: a "
                                         "reason counts only where the reference is not garbage for it (this "
                                         "judges the cell; older files: judged alone)", "fraction")
    garbage: Figures | None = doc("{reason: {count, example}}: repetition_loop, empty, replacement_characters, "
                                  "cut_short (relative to the reference), each with its first example")
    absolute_garbage_fraction: float | None = doc("outputs garbage for some reason judged alone / checked, "
                                                  "the reference's own garbage included", "fraction")
    absolute_garbage: Figures | None = doc("{reason: {count, example}}: the outputs judged alone, each under its "
                                           "first reason")
    reference_unstable: int | None = doc("checked prompts whose two one-at-a-time reference answers differ: the "
                                         "server's noise floor; null when the reference was answered once",
                                         "requests")
    diverged_where_stable: int | None = doc("outputs that differ from the reference among the prompts the server "
                                            "answered the same twice alone; null when the reference was "
                                            "answered once", "requests")
    max_garbage_fraction: float | None = doc("the --max-garbage-fraction the cell was judged by", "fraction")
    output_share: float | None = doc("the verification requests' share of the cell's output tokens = Σ their "
                                     "completion_tokens / (that + output_tokens); their tokens are in no "
                                     "throughput figure", "fraction")
