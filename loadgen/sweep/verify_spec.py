"""A sweep file's `[verify]` table (docs/sweep.md, docs/verify.md): the run flags of every configuration's
`--verify`, and the reference configuration, measured first, whose outputs the others are compared with (it
saves its reference beside its results; the others read it)."""

from __future__ import annotations

import os

from loadgen.errors import UsageError
from loadgen.names import VerifyMode, values

VERIFY_KEYS = {"mode", "prompts", "max_tokens", "max_garbage_fraction", "reference"}


def verify_flags(verify: dict, where: str, base: str) -> list[str]:
    """The run flags of [verify] (`--verify` is on whenever the table is there; `mode` picks garbage or exact);
    each value is checked here, so a bad one stops the sweep before anything runs."""
    if not verify:
        return []
    unknown = sorted(set(verify) - VERIFY_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(VERIFY_KEYS))}")
    mode = verify.get("mode", VerifyMode.GARBAGE.value)
    if mode not in values(VerifyMode):
        raise UsageError(f"{where}: mode = {mode!r}; choose one of {', '.join(values(VerifyMode))}")
    flags = ["--verify", mode]
    if "prompts" in verify:
        if not isinstance(verify["prompts"], str):
            raise UsageError(f"{where}: prompts must be a file path (relative to the sweep file)")
        flags += ["--verify-prompts", os.path.join(base, verify["prompts"])]
    max_tokens = verify.get("max_tokens")
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise UsageError(f"{where}: max_tokens = {max_tokens!r} must be a whole number")
        flags += ["--verify-max-tokens", str(max_tokens)]
    limit = verify.get("max_garbage_fraction")
    if limit is not None:
        if not isinstance(limit, int | float) or isinstance(limit, bool):
            raise UsageError(f"{where}: max_garbage_fraction = {limit!r} must be a number")
        flags += ["--max-garbage-fraction", repr(float(limit))]
    return flags


def reference_first(configs: list, reference, where: str) -> str | None:
    """The [verify] reference configuration's name, moved to the front of `configs` (it is measured first:
    the others compare with its outputs); a name that is no configuration is a UsageError."""
    if reference is None:
        return None
    names = [c.name for c in configs]
    if not isinstance(reference, str) or reference not in names:
        raise UsageError(f"{where}: reference = {reference!r} is no configuration of this sweep; choose one of "
                         f"{', '.join(names)}")
    configs.sort(key=lambda c: c.name != reference)
    return reference


def reference_args(out_dir: str, reference: str | None, name: str) -> list[str]:
    """The flags of configuration `name`: the reference configuration saves its reference, the others read it."""
    if reference is None:
        return []
    path = os.path.join(out_dir, f"{reference}.verify-reference.json")
    return ["--verify-save-reference" if name == reference else "--verify-reference", path]
