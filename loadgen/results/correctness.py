"""A cell's `correctness` part (`--verify`): its fields with their meaning, the part built from the cell's
verification records, and what it says about the cell (garbage relative to the reference fails it; divergence
is a note, said beside the server's own noise floor, or fails it under `--verify exact`). Formulas are in
`loadgen.metrics.correctness`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loadgen.metrics.correctness import (
    absolute_garbage,
    divergence_figures,
    fractions,
    garbage_reasons,
    noise_floor,
    verification_share,
)
from loadgen.names import VerifyMode
from loadgen.record import Record
from loadgen.results.correctness_part import Correctness
from loadgen.results.incidents import Incident, IncidentKind

if TYPE_CHECKING:
    from loadgen.results.cell_result import CellResult


@dataclass(frozen=True)
class Verification:
    """A cell's verification as `verify/verifier.py` measured it: its records (those that ended ok carry their
    verdict), the reference they were compared with and the settings they are judged by."""

    records: Sequence[Record]
    mode: VerifyMode
    reference: str
    max_tokens: int
    max_garbage_fraction: float


def correctness_part(verification: Verification, output_tokens: int) -> Correctness:
    """The part, from the cell's verification and the measured requests' output tokens."""
    verified = verification.records
    verdicts = [r.verify for r in verified if r.ok and r.verify is not None]
    checked, exact, garbage_frac = fractions(verdicts)
    alone_frac, alone = absolute_garbage(verdicts)
    unstable, where_stable = noise_floor(verdicts)
    part = Correctness(mode=str(verification.mode), reference=verification.reference,
                       max_tokens=verification.max_tokens, checked=checked,
                       failed=sum(1 for r in verified if not r.ok),
                       unit=str(verdicts[0]["unit"]) if verdicts else None, exact_match_fraction=exact,
                       diverged=sum(1 for v in verdicts if v.get("divergence") is not None),
                       first_divergence_tokens=divergence_figures(verdicts), garbage_fraction=garbage_frac,
                       garbage=garbage_reasons(verdicts), absolute_garbage_fraction=alone_frac,
                       absolute_garbage=alone, reference_unstable=unstable, diverged_where_stable=where_stable,
                       max_garbage_fraction=verification.max_garbage_fraction,
                       output_share=verification_share(verified, output_tokens))
    return part


def garbage_note(part: Correctness) -> str | None:
    """'GARBAGE OUTPUT: 8 of 8 verification outputs (100% > 0 --max-garbage-fraction): 8 repetition_loop (…)',
    or None when the garbage fraction is within the limit."""
    frac, limit = part.garbage_fraction, part.max_garbage_fraction or 0.0
    if frac is None or frac <= limit:
        return None
    reasons = part.garbage or {}
    n = sum(r["count"] for r in reasons.values())
    first = next(iter(reasons.items()))
    detail = ", ".join(f"{r['count']} {name}" for name, r in reasons.items())
    return (f"GARBAGE OUTPUT: {n} of {part.checked} verification outputs ({frac:.0%} > {limit:g} "
            f"--max-garbage-fraction){against_reference(part)}: {detail} (e.g. {first[0]}: {first[1]['example']})")


def against_reference(part: Correctness) -> str:
    """' against the reference (11 alone)' where the outputs judged alone count more garbage, else ''."""
    alone = part.absolute_garbage
    if alone is None:
        return ""
    n_alone = sum(r["count"] for r in alone.values())
    n = sum(r["count"] for r in (part.garbage or {}).values())
    return f" against the reference ({n_alone} alone)" if n_alone > n else ""


def divergence_note(part: Correctness) -> str | None:
    """'3 of 8 outputs differ from the reference (run_start) from token 47 (min), 48 (p50)', then the server's
    noise floor beside it where the reference was answered twice ('; noise floor: alone the server answered 2 of
    8 prompts two ways, 1 of the 6 others differ here'), or None."""
    div = part.first_divergence_tokens
    if not div:
        return None
    note = (f"{part.diverged} of {part.checked} outputs differ from the reference ({part.reference}) "
            f"from token {div['min']} (min), {div['p50']:g} (p50)")
    unstable, where_stable = part.reference_unstable, part.diverged_where_stable
    if unstable is None or where_stable is None:
        return note
    if not unstable:
        return note + "; noise floor: none (alone the server answered every prompt the same twice)"
    stable = (part.checked or 0) - unstable
    if not stable:
        return note + f"; noise floor: alone the server answered all {unstable} prompts two ways (no evidence)"
    return (note + f"; noise floor: alone the server answered {unstable} of {part.checked} prompts two ways, "
            f"{where_stable} of the {stable} others differ here")


def correctness_incidents(part: Correctness) -> list[Incident]:
    """Garbage beyond the limit fails the cell; a divergence is a note, and fails it under --verify exact."""
    found = []
    garbage = garbage_note(part)
    if garbage:
        found.append(Incident(IncidentKind.GARBAGE_OUTPUT, garbage))
    diverged = divergence_note(part)
    if diverged and part.mode == VerifyMode.EXACT:
        found.append(Incident(IncidentKind.OUTPUT_MISMATCH, f"OUTPUT MISMATCH (--verify exact): {diverged}"))
    elif diverged:
        found.append(Incident(IncidentKind.OUTPUT_DIVERGED, diverged))
    return found


def produced_garbage(cell: CellResult) -> bool:
    """The cell's garbage fraction is above the limit it was judged by."""
    return cell.correctness is not None and garbage_note(cell.correctness) is not None


def verify_text(cell: CellResult) -> str:
    """The table's `verify` column: 'garb 8/8' (garbage outputs / checked), else 'diff 3/8' (outputs that
    differ from the reference), else 'exact 8/8'; '-' for a cell without verification."""
    part = cell.correctness
    if part is None:
        return "-"
    checked = part.checked
    if not checked:
        return "none 0/0"
    garbage = sum(r["count"] for r in (part.garbage or {}).values())
    if garbage:
        return f"garb {garbage}/{checked}"
    if part.diverged:
        return f"diff {part.diverged}/{checked}"
    return f"exact {checked}/{checked}"
