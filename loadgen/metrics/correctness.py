"""Whether outputs stayed right (`--verify`): garbage judged against the reference, divergence from it, the
server's own noise floor, and a cell's correctness figures. One formula each; the cell's result, the table and
the live exporter call these (docs/definitions.md#correctness).

An output is garbage for a reason (a loop, replacement characters, empty, cut short) only where its reference
output is not garbage for that reason: a model whose clean answer to a prompt holds U+FFFD is not wrong to hold
it under load. Both counts are kept: `alone` (every reason the output has) and the relative one, which judges.

An output's tokens are the server's (ids, or logprob token strings); where it returned only text, the text is
cut into pieces (a word with its leading space, a digit run, one symbol, a whitespace run) and a position in
pieces is carried over to tokens by the output's own ratio: round(piece × completion_tokens / pieces).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from loadgen.client.verify_request import VerifyOutput
from loadgen.metrics.stats import percentile
from loadgen.names import GarbageReason
from loadgen.record import Record

MAX_LOOP_PERIOD = 32  # the longest repeated n-gram looked for, in tokens
LOOP_REPEATS = 4  # a loop repeats its n-gram at least this often ...
LOOP_MIN_TOKENS = 24  # ... and spans at least this many tokens, to the end of the output
CUT_SHORT_FRACTION = 0.5  # fewer tokens than this share of max_tokens, without a stop reason, is cut short
EXAMPLE_CHARS = 80
PIECE = re.compile(r" ?\w+| ?[^\w\s]|\s+")


def units(out: VerifyOutput) -> list:
    """The output's tokens, or the pieces of its text where the server gave none (trailing whitespace left
    out: it would break a loop that runs to the end)."""
    return list(out.tokens) if out.tokens is not None else PIECE.findall(out.text.rstrip())


def repetition_loop(tokens: Sequence) -> tuple[int, int] | None:
    """(period p, start s) of an n-gram repeated to the end: the smallest p ≤ MAX_LOOP_PERIOD for which
    tokens[i] = tokens[i − p] for every i from s + p to the end, where the loop's span n − s ≥ max(LOOP_REPEATS·p,
    LOOP_MIN_TOKENS); None when there is none."""
    n = len(tokens)
    for p in range(1, min(MAX_LOOP_PERIOD, n // LOOP_REPEATS) + 1):
        i = n - 1
        while i >= p and tokens[i] == tokens[i - p]:
            i -= 1
        start = i + 1 - p  # tokens[start:] repeats tokens[start:start + p]
        if n - start >= max(LOOP_REPEATS * p, LOOP_MIN_TOKENS):
            return p, max(0, start)
    return None


def garbage_all(out: VerifyOutput, max_tokens: int) -> dict[GarbageReason, str]:
    """{reason: a short example} of every reason the output is garbage for, judged on the output alone, in
    this order: empty (no text and no tokens); replacement characters (U+FFFD, which is also what invalid UTF-8
    becomes); a repetition loop (`repetition_loop`); cut short (completion_tokens < CUT_SHORT_FRACTION ×
    max_tokens without a stop reason). Each check is independent: a loop that follows a U+FFFD is both."""
    toks = units(out)
    found: dict[GarbageReason, str] = {}
    if not out.text.strip() and not out.tokens:
        found[GarbageReason.EMPTY] = repr(out.text[:EXAMPLE_CHARS])
    bad = out.text.find("\ufffd")
    if bad >= 0:
        found[GarbageReason.REPLACEMENT_CHARACTERS] = out.text[max(0, bad - 20):bad + 20]
    loop = repetition_loop(toks)
    if loop is not None:
        period, start = loop
        found[GarbageReason.REPETITION_LOOP] = (f"{period}-gram ×{(len(toks) - start) // period} from token "
                                                f"{start}: …{out.text[-EXAMPLE_CHARS:]!r}")
    n = out.completion_tokens if out.completion_tokens is not None else len(toks)
    if n < CUT_SHORT_FRACTION * max_tokens and not out.stopped:
        found[GarbageReason.CUT_SHORT] = f"{n} of {max_tokens} tokens, finish reason {out.finish_reason}"
    return found


def garbage(out: VerifyOutput, max_tokens: int) -> tuple[GarbageReason, str] | None:
    """The first reason of `garbage_all` with its example, or None: the output judged alone."""
    return next(iter(garbage_all(out, max_tokens).items()), None)


def checks_off(max_tokens: int, *answers: VerifyOutput | None) -> frozenset[GarbageReason]:
    """The reasons a prompt's reference answers (one, or both of a twice-answered reference) are garbage for:
    for that prompt those checks are off (the server's clean answer already fails them)."""
    return frozenset(r for a in answers if a is not None for r in garbage_all(a, max_tokens))


def relative_garbage(found: dict[GarbageReason, str],
                     off: frozenset[GarbageReason]) -> tuple[GarbageReason, str] | None:
    """The first reason the output is garbage for that its reference is not garbage for, with its example."""
    return next(((r, ex) for r, ex in found.items() if r not in off), None)


def first_divergence(reference: Sequence, output: Sequence) -> int | None:
    """The first position where the two differ (the shorter one's length when one is the other's start);
    None when they are identical."""
    for i, (a, b) in enumerate(zip(reference, output)):
        if a != b:
            return i
    return None if len(reference) == len(output) else min(len(reference), len(output))


def divergence_tokens(reference: VerifyOutput, out: VerifyOutput) -> int | None:
    """Where `out` leaves `reference`, in the server's tokens (module docstring for text), or None when equal.
    Tokens are compared when both have them in the same unit, else the texts' pieces."""
    if reference.tokens is not None and out.tokens is not None and reference.unit == out.unit:
        return first_divergence(reference.tokens, out.tokens)
    ref, got = PIECE.findall(reference.text), PIECE.findall(out.text)
    pos = first_divergence(ref, got)
    if pos is None or out.completion_tokens is None or not got:
        return pos
    return round(pos * out.completion_tokens / len(got))


def verdict(index: int, out: VerifyOutput, reference: VerifyOutput | None, max_tokens: int,
            again: VerifyOutput | None = None) -> dict:
    """One verification request's verdict, as its record carries it: {prompt, tokens, unit, exact, divergence,
    garbage, example, alone, stable, text}. `garbage` (with its `example`) is the first reason of the output
    that its reference is not garbage for (`relative_garbage`; `checks_off` over the reference and `again`, its
    second one-at-a-time answer); `alone` is {reason: example} of the output judged alone; `stable` says the
    server answered the prompt the same twice alone (None: the reference was answered once); `exact` is None
    without a reference."""
    found = garbage_all(out, max_tokens)
    judged = relative_garbage(found, checks_off(max_tokens, reference, again))
    div = divergence_tokens(reference, out) if reference is not None else None
    stable = None if reference is None or again is None else divergence_tokens(reference, again) is None
    return {"prompt": index, "tokens": out.completion_tokens, "unit": out.unit,
            "exact": None if reference is None else div is None, "divergence": div,
            "garbage": judged[0] if judged else None, "example": judged[1] if judged else None,
            "alone": {str(r): ex for r, ex in found.items()}, "stable": stable, "text": out.text[:2000]}


def fractions(verdicts: Sequence[dict]) -> tuple[int, float | None, float | None]:
    """(checked, exact_match_fraction, garbage_fraction): checked = verdicts; exact match = exact / those
    compared with a reference; garbage = garbage (relative to the reference) / checked. None where there is
    nothing to divide by."""
    compared = [v for v in verdicts if v.get("exact") is not None]
    exact = sum(1 for v in compared if v["exact"]) / len(compared) if compared else None
    bad = sum(1 for v in verdicts if v.get("garbage")) / len(verdicts) if verdicts else None
    return len(verdicts), exact, bad


def garbage_reasons(verdicts: Sequence[dict]) -> dict:
    """{reason: {count, example}}: each (relative) reason's count over the verdicts, and the first one's
    example."""
    out: dict = {}
    for v in verdicts:
        if v.get("garbage"):
            entry = out.setdefault(str(v["garbage"]), {"count": 0, "example": v.get("example")})
            entry["count"] += 1
    return out


def absolute_garbage(verdicts: Sequence[dict]) -> tuple[float | None, dict]:
    """(fraction, {reason: {count, example}}) of the outputs judged alone: fraction = outputs garbage for some
    reason / checked; each output counts once, under its first reason. Older verdicts (no `alone`) count their
    `garbage`, which was judged alone then."""
    reasons: dict = {}
    bad = 0
    for v in verdicts:
        alone = v.get("alone")
        if alone is None:
            alone = {v["garbage"]: v.get("example")} if v.get("garbage") else {}
        if alone:
            bad += 1
            reason, example = next(iter(alone.items()))
            reasons.setdefault(str(reason), {"count": 0, "example": example})["count"] += 1
    return (bad / len(verdicts) if verdicts else None), reasons


def noise_floor(verdicts: Sequence[dict]) -> tuple[int | None, int | None]:
    """(unstable, diverged_where_stable): prompts whose two one-at-a-time reference answers differ, among the
    checked; outputs that differ from the reference among the prompts whose two answers agree. (None, None)
    when the reference was answered once (no `stable`)."""
    known = [v for v in verdicts if v.get("stable") is not None]
    if not known:
        return None, None
    return (sum(1 for v in known if not v["stable"]),
            sum(1 for v in known if v["stable"] and v.get("divergence") is not None))


def divergence_figures(verdicts: Sequence[dict]) -> dict | None:
    """{min, p50} of the first divergence position (server tokens) over the verdicts that differ; None when
    none differs."""
    positions = [v["divergence"] for v in verdicts if v.get("divergence") is not None]
    if not positions:
        return None
    return {"min": min(positions), "p50": percentile(positions, 50), "n": len(positions)}


def verification_share(verified: Sequence[Record], output_tokens: int) -> float | None:
    """Σ completion_tokens of the ok verification records / (that + the measured output tokens); None when
    both are 0."""
    mine = sum(r.completion_tokens or 0 for r in verified if r.ok)
    return mine / (mine + output_tokens) if mine + output_tokens else None
