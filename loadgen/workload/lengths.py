"""Spreads of the synthetic matrix's lengths: a prompt length or output length drawn per request.

`--contexts 1024±25%` (or `1024+-25%`) draws each request's prompt length uniformly from [768, 1280];
`1024±100` from [924, 1124]; `--context-dist normal:1024:128` draws it from a normal law of mean 1024 and
standard deviation 128 (rounded, at least 1). `--max-tokens` and `--output-dist` do the same for output
lengths. Draws are seeded by --seed and the cell, so a run repeats exactly; each prompt is still fitted to its
own length exactly. Fixed lengths (no spread) stay the default.
"""

from __future__ import annotations

from loadgen.config import LengthSpread
from loadgen.errors import UsageError
from loadgen.names import SpreadLaw, values

SPREAD_SIGNS = ("±", "+-")


def split_item(flag: str, item: str) -> tuple[str, LengthSpread | None]:
    """'1024±25%' → ('1024', uniform ±25 %); '1024' → ('1024', None)."""
    for sign in SPREAD_SIGNS:
        if sign in item:
            centre, width = item.split(sign, 1)
            relative = width.strip().endswith("%")
            try:
                value = float(width.strip().rstrip("%"))
            except ValueError:
                raise UsageError(f"{flag}: {item!r}: give a spread as N±P% or N±D, e.g. 1024±25%") from None
            if not value >= 0 or (relative and value >= 100):
                raise UsageError(f"{flag}: {item!r}: the spread must be ≥ 0 (and below 100%)")
            return centre.strip(), LengthSpread(SpreadLaw.UNIFORM, value / 100 if relative else value, relative)
    return item.strip(), None


def centres(flag: str, text: str) -> tuple[str, dict[int, LengthSpread]]:
    """'1024±25%,60' → ('1024,60', {1024: uniform ±25 %}): the list without its spreads, and the spreads by
    centre (a centre that is not an integer is left for the list's own check to name)."""
    parts, spreads = [], {}
    for item in text.split(","):
        centre, spread = split_item(flag, item)
        parts.append(centre)
        if spread is not None and centre.isdigit():
            spreads[int(centre)] = spread
    return ",".join(parts), spreads


def centre_int(flag: str, text: str) -> tuple[int, LengthSpread | None]:
    """'512±10%' → (512, uniform ±10 %); '512' → (512, None)."""
    centre, spread = split_item(flag, text)
    try:
        return int(centre), spread
    except ValueError:
        raise UsageError(f"{flag}: {centre!r} is not an integer; give N or N±P%, e.g. 512 or 512±25%") from None


def parse_dist(flag: str, text: str) -> tuple[int, LengthSpread]:
    """'normal:1024:128' → (1024, normal sd 128); 'uniform:1024:256' → (1024, uniform ±256)."""
    parts = text.split(":")
    try:
        law, centre, width = parts[0], int(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        raise UsageError(f"{flag} {text!r}: give LAW:MEAN:WIDTH, e.g. normal:1024:128 or uniform:1024:256") \
            from None
    if law not in values(SpreadLaw) or len(parts) != 3 or centre < 1 or not width >= 0:
        raise UsageError(f"{flag} {text!r}: LAW is normal or uniform, MEAN ≥ 1 and WIDTH ≥ 0, e.g. normal:1024:128")
    return centre, LengthSpread(SpreadLaw(law), width)
