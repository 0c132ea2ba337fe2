"""How sure a cell's SLO attainment is: the Wilson score interval of good / scheduled, and whether it decides
the cell's verdict against the required attainment (pure; `loadgen search` extends a probe it does not decide).

With n scheduled requests, k good, p = k / n and z = 1.96 (95 %):

    centre = (p + z² / 2n) / (1 + z² / n),   half = z / (1 + z² / n) · √(p (1 − p) / n + z² / 4n²),

interval = [centre − half, centre + half]. Wilson rather than the normal approximation p ± z √(p(1−p)/n):
attainments sit near 1, where the normal interval collapses to a point (p = 1 gives [1, 1] at any n) and its
coverage falls apart; Wilson's stays inside [0, 1] and is honest at k = n (lower bound n / (n + z²)).

decided: met when the lower bound ≥ the required attainment, missed when the upper bound < it; otherwise the
interval straddles the target and more requests are needed. All good of 35 requests is the fewest that decide
"met" against 90 % (35 / 38.84 = 0.901), which is why a search probe measures at least 40 (docs/search.md).
"""

from __future__ import annotations

import math

Z95 = 1.96


def wilson_interval(good: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """[low, high] of good / n (module docstring); None when n is 0."""
    if n <= 0:
        return None
    p = good / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def decided(good: int, n: int, required: float) -> bool | None:
    """True: met beyond noise; False: missed beyond noise; None: the interval straddles `required` (or n = 0)."""
    interval = wilson_interval(good, n)
    if interval is None:
        return None
    low, high = interval
    if low >= required:
        return True
    if high < required:
        return False
    return None
