"""A verification reference on disk (`--verify-save-reference FILE`, read by `--verify-reference FILE`): the
prompts, the settings they were answered with and each prompt's output, answered twice one at a time where the
run answered it (`outputs_again`: the server's own noise floor; files saved before it hold one answer).

A reference is used only for what it answers: the same prompts in the same order (their digest) and the same
max tokens; anything else is refused before any load (exit 2), with what differs. What the reference says of
itself (its own garbage, its noise floor) is `reference_summary`, stored in the results and said before the
first cell (`reference_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from loadgen.client.verify_request import VerifyOutput
from loadgen.errors import UsageError
from loadgen.files import read_input, write_json_atomic
from loadgen.metrics.correctness import checks_off, divergence_tokens
from loadgen.metrics.stats import percentile
from loadgen.names import GarbageReason

REFERENCE_SCHEMA = "loadgen.verify-reference/v1"


@dataclass
class Reference:
    """The outputs the cells' outputs are compared with; `source` names where they came from."""

    source: str
    prompts: list[str]
    max_tokens: int
    outputs: list[VerifyOutput]
    digest: str
    model: str | None = None
    api: str | None = None
    again: list[VerifyOutput] | None = None  # the second one-at-a-time answers; None: answered once

    def again_of(self, index: int) -> VerifyOutput | None:
        return self.again[index] if self.again is not None else None

    def to_json(self) -> dict[str, Any]:
        doc = {"schema": REFERENCE_SCHEMA, "source": self.source, "model": self.model, "api": self.api,
               "max_tokens": self.max_tokens, "prompts_digest": self.digest, "prompts": self.prompts,
               "outputs": [o.to_json() for o in self.outputs]}
        if self.again is not None:
            doc["outputs_again"] = [o.to_json() for o in self.again]
        return doc

    def save(self, path: str) -> None:
        write_json_atomic(path, self.to_json())


def load_reference(path: str, flag: str = "--verify-reference") -> Reference:
    """The reference saved at `path`; an unreadable file or one that is not a reference is a UsageError."""
    raw = read_input(path, "give a file written by --verify-save-reference", flag)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{flag} {path}: cannot be read as JSON ({exc}); give a file written by "
                         "--verify-save-reference") from None
    if not isinstance(doc, dict) or doc.get("schema") != REFERENCE_SCHEMA or not doc.get("outputs"):
        raise UsageError(f"{flag} {path}: not a verification reference ({REFERENCE_SCHEMA}); give a file "
                         "written by --verify-save-reference")
    try:
        outputs = [VerifyOutput.from_json(o) for o in doc["outputs"]]
        again = [VerifyOutput.from_json(o) for o in doc["outputs_again"]] if doc.get("outputs_again") else None
        if again is not None and len(again) != len(outputs):
            raise ValueError(f"{len(again)} outputs_again for {len(outputs)} outputs")
        return Reference(f"file:{path}", list(doc["prompts"]), int(doc["max_tokens"]), outputs,
                         str(doc["prompts_digest"]), doc.get("model"), doc.get("api"), again)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{flag} {path}: a field is missing or wrong ({exc}); write it again with "
                         "--verify-save-reference") from None


def check_matches(ref: Reference, digest: str, max_tokens: int, flag: str = "--verify-reference") -> None:
    """The reference answers these prompts with these max tokens, else a UsageError naming the difference."""
    if ref.digest != digest:
        raise UsageError(f"{flag}: the reference answers other prompts ({len(ref.prompts)} prompts, digest "
                         f"{ref.digest} ≠ {digest}); give the same --verify-prompts it was saved with")
    if ref.max_tokens != max_tokens:
        raise UsageError(f"{flag}: the reference was answered with --verify-max-tokens {ref.max_tokens}, this "
                         f"run asks {max_tokens}; give --verify-max-tokens {ref.max_tokens}")


# how the note before the first cell says that a reference output is garbage for a reason
SAYS = {GarbageReason.REPLACEMENT_CHARACTERS: "hold replacement characters", GarbageReason.EMPTY: "are empty",
        GarbageReason.REPETITION_LOOP: "end in a repetition loop", GarbageReason.CUT_SHORT: "are cut short"}


def reference_summary(ref: Reference) -> dict[str, Any]:
    """The results' `verify` part: {reference, prompts, max_tokens, answers (1 or 2), reference_garbage
    {reason: [prompt]}: the prompts whose reference answers (either one) are garbage for that reason (that
    check is off for them), unstable [prompt] | null: the prompts whose two one-at-a-time answers differ
    (null: answered once), unstable_divergence_tokens {min, p50, n} | null: where those two answers part}."""
    found = [checks_off(ref.max_tokens, out, ref.again_of(i)) for i, out in enumerate(ref.outputs)]
    off = {str(r): [i for i, f in enumerate(found) if r in f] for r in GarbageReason if any(r in f for f in found)}
    unstable = positions = None
    if ref.again is not None:
        split = {i: divergence_tokens(a, b) for i, (a, b) in enumerate(zip(ref.outputs, ref.again))}
        unstable = [i for i, pos in split.items() if pos is not None]
        found_at = [pos for pos in split.values() if pos is not None]  # in the order of `unstable`
        positions = {"min": min(found_at), "p50": percentile(found_at, 50), "n": len(found_at)} if found_at else None
    return {"reference": ref.source, "prompts": len(ref.outputs), "max_tokens": ref.max_tokens,
            "answers": 1 if ref.again is None else 2, "reference_garbage": off, "unstable": unstable,
            "unstable_divergence_tokens": positions}


def reference_lines(summary: dict[str, Any]) -> list[str]:
    """What the run says of its reference before the first cell: its own garbage ('3 of 8 reference outputs
    hold replacement characters: for those prompts that check is off; divergence still counts') and its noise
    floor ('the server is not deterministic alone for 8 of 8 prompts: divergence under load is not evidence
    against it'), or that the floor is unknown (a reference answered once)."""
    n = summary["prompts"]
    lines = []
    off = summary["reference_garbage"]
    if off:
        said = ", ".join(f"{len(p)} of {n} reference outputs {SAYS[GarbageReason(r)]} ({named(p)})"
                         for r, p in off.items())
        lines.append(f"{said}: for those prompts {'that check is' if len(off) == 1 else 'those checks are'} off; "
                     "divergence still counts")
    unstable = summary["unstable"]
    if unstable is None:
        lines.append(f"the reference ({summary['reference']}) holds one answer per prompt: the server's noise floor "
                     "alone is unknown (a reference saved by this version answers each prompt twice)")
    elif unstable:
        at = summary["unstable_divergence_tokens"]
        lines.append(f"the server is not deterministic alone for {len(unstable)} of {n} prompts ({named(unstable)}; "
                     f"its two answers part from token {at['min']} min, {at['p50']:g} p50): divergence under load "
                     "is not evidence against it")
    else:
        lines.append(f"the server answered each of the {n} prompts the same twice alone: any divergence under load "
                     "comes from the load")
    return lines


def named(prompts: list[int], shown: int = 10) -> str:
    """'prompt 1, 4, 6' (the first `shown`, then '…')."""
    more = ", …" if len(prompts) > shown else ""
    return f"prompt {', '.join(map(str, prompts[:shown]))}{more}"
