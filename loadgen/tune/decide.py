"""The tune's decisions, pure: how large a load's parts are, whether a configuration's load is measured again
after a part, and which configurations are still contenders once every configuration has been visited.

After each part of configuration X at a load, X's estimate there (every part so far: the verdict's `estimate`)
is compared with the best other configuration measured at that load, the leader L, by the verdict's margin
(`verdict.margin`, its 95 % interval from the two estimates' intervals):

- beyond noise worse: L's margin over X is clear of 0 and ≥ the resolution → stop: X cannot win here;
- beyond noise better: X's margin over L is → stop: X leads, and L's own parts do not change that;
- tied at the resolution: the margin's whole interval lies inside ±resolution → stop: more requests cannot
  make a difference worth a restart;
- else close → one more part at the same load (a cell `again` N), while the visit has room for one (a visit
  measures at most `requests_per_cell` requests at a load) and the parts it has room for could decide the load
  against the leader's interval as it stands (`reach`): more parts of X cannot settle a margin that the leader's
  own noise keeps open, so X stops there and both are measured again at the end, when they are contenders;
- no leader yet (the first configuration measured at the load), or no figure (the part failed) → stop.

At the end the contenders are measured again in the same round, so the projection takes the leader's estimate
as it will be after as many parts (`reach(both=True)`): a tie that even every part a round has room for could not
settle nor break (an exact twin, two configurations 2 % apart with parts of ±3 %) stops after its forced part and
is declared tied within noise, rather than measured in full for the same answer.

Once every configuration has been visited, a load whose verdict is a tie that is not settled (some tied
configuration's margin interval reaches beyond the resolution) names its contenders: the leader and each tied
configuration that a round of as many parts again could still separate from it or settle (`decidable`). They
are visited again, and measured there once more. A tie no round could move (noise between runs far wider than
the margins) is declared tied within noise without the round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from loadgen.results.verdict import Decision, Estimate, Margin, Verdict, margin
from loadgen.results.verdict_noise import Z95

MIN_PART_REQUESTS = 8  # fewer requests give a bootstrap interval of little use


class Step(StrEnum):
    STOP = "stop"
    EXTEND = "extend"


@dataclass(frozen=True)
class Call:
    """What follows a part: stop or measure again, and why (said in the log and stored with the part)."""

    step: Step
    why: str


def part_requests(full: int, concurrency: int, share: float) -> int:
    """A part's measured requests: n = min(R, max(⌈share·R⌉, C, 8)), R the sweep's requests per cell, C the
    load's concurrency (a closed loop's part fills every slot at least once)."""
    return min(full, max(math.ceil(share * full), concurrency, MIN_PART_REQUESTS))


def visit_order(n: int) -> list[int]:
    """The order the first pass visits n configurations in: the first, the last, then the middle of every gap, the
    widest first (0, 8, 4, 2, 6, 1, 3, 5, 7 for 9). Early stopping saves most when a strong leader is measured
    early, and along a grid's axis the best value is rarely at one end only (a draft budget too small or too large
    loses): spreading the first visits over the file's order meets the best region sooner than walking it. The
    first stays first: it is the control."""
    if n <= 2:
        return list(range(n))
    order, gaps = [0, n - 1], [(0, n - 1)]
    while gaps:
        gaps.sort(key=lambda g: g[0] - g[1])  # the widest gap first, the earlier of equal ones
        lo, hi = gaps.pop(0)
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        order.append(mid)
        gaps += [(lo, mid), (mid, hi)]
    return order


def parts_most(full: int, part: int) -> int:
    """Parts a visit measures at one load at most: as many whole parts as fit in R requests (at least one)."""
    return max(1, full // part)


def round_room(full: int, concurrency: int, share: float) -> int:
    """The parts a round at the end measures of each contender at a load: as many as a visit has room for."""
    return parts_most(full, part_requests(full, concurrency, share))


def pct(m: Margin) -> str:
    """'+4.1% [+1.2%, +7.0%]' (the margin and its 95 % interval), or '+4.1%' without one."""
    text = f"{m.value * 100:+.1f}%"
    return text if m.interval is None else text + f" [{m.interval[0] * 100:+.1f}%, {m.interval[1] * 100:+.1f}%]"


def settled(m: Margin, resolution: float) -> bool:
    """The margin's whole 95 % interval lies inside ±resolution: a tie more requests would not undo."""
    return m.interval is not None and -resolution < m.interval[0] and m.interval[1] < resolution


def reach(leader: Estimate, d: float, parts: int, part_se: float, resolution: float, both: bool = False) -> bool:
    """Whether `parts` parts of a configuration whose log-ratio to `leader` stays d could decide it: beaten either
    way (|d| − H > 0, beyond the resolution) or settled (|d| + H < ln(1 + resolution)), where H = 1.96·√(s_L² +
    s_n²), s_n = part_se / √n the estimate of n parts of log-sd `part_se` as the verdict makes it (each part's own
    variance and the noise between runs, averaged over n), and s_L the leader's log-scale standard error now, or
    (`both`: the leader is measured again in the same round) s_n too."""
    s_n = part_se / math.sqrt(parts)
    h = Z95 * math.hypot(s_n if both else leader.log_se() or 0.0, s_n)
    d = abs(d)
    return (d - h > 0 and math.expm1(d) >= resolution) or d + h < math.log1p(resolution)


def after_part(mine: Estimate | None, leader: Estimate | None, higher_is_better: bool, resolution: float,
               parts: int, room: int, part_se: float = 0.0, both: bool = False) -> Call:
    """What follows a part of `mine` at a load where `leader` is the best other configuration (module docstring):
    `parts` measured there in all, `room` more the visit may measure, `part_se` the log-sd of one part (0: no
    projection: every close load is measured again while there is room), `both`: the leader is a contender
    measured again in the same round (`reach`)."""
    if mine is None:
        return Call(Step.STOP, "no figure: the part was not measured")
    if leader is None:
        return Call(Step.STOP, "the first configuration measured at this load")
    ahead = (mine.value > leader.value) == higher_is_better
    m = margin(mine, leader, higher_is_better) if ahead else margin(leader, mine, higher_is_better)
    if m.beats(resolution):
        return Call(Step.STOP, f"leads {leader.config} beyond noise ({pct(m)})" if ahead else
                    f"beyond noise worse than {leader.config} ({pct(m)} for it)")
    side = "ahead of" if ahead else "behind"
    if settled(m, resolution):
        return Call(Step.STOP, f"tied with {leader.config} within ±{resolution:.0%} ({side}: {pct(m)})")
    close = f"close to {leader.config} ({side}: {pct(m)})"
    if room <= 0:
        return Call(Step.STOP, f"{close}, measured in full")
    if part_se and not reach(leader, math.log1p(m.value), parts + room, part_se, resolution, both):
        if both:
            return Call(Step.STOP, f"{close}; {parts + room} parts of each could not decide it: tied within noise")
        return Call(Step.STOP, f"{close}; {parts + room} parts could not decide it against {leader.config}'s own "
                               "interval: both measured again at the end")
    return Call(Step.EXTEND, f"{close}: measured again")


def projected_se(e: Estimate, room: int) -> float:
    """The log-scale standard error of `e` after `room` more measurements like its own: s·√(n / (n + room))."""
    n = max(len(e.measurements), 1)
    return (e.log_se() or 0.0) * math.sqrt(n / (n + room))


def decidable(leader: Estimate, other: Estimate, room: int, resolution: float) -> bool:
    """Whether a round that measures both `room` more times could decide their tie: beat one beyond the resolution
    or settle it within (`reach`'s test, each estimate's error shrunk as its measurements grow)."""
    d = abs(math.log(leader.value / other.value))
    h = Z95 * math.hypot(projected_se(leader, room), projected_se(other, room))
    return (d - h > 0 and math.expm1(d) >= resolution) or d + h < math.log1p(resolution)


def contenders(v: Verdict, higher_is_better: bool, resolution: float, room: int | None = None) -> list[str]:
    """The configurations to measure again at the verdict's load: the leader and each tied configuration whose
    margin interval reaches beyond the resolution (`settled`) and, given `room` (the parts a round measures of
    each), that such a round could decide (`decidable`): measuring a tie that one round cannot move is cost with
    no answer. None when the load is decided, its tie settled, or no tied pair is within a round's reach."""
    if v.decision is not Decision.TIED or not v.ranked:
        return []
    leader = v.ranked[0]
    tied = [e for e in v.ranked[1:] if e.config in v.tied]
    open_ = [e for e in tied if not settled(margin(leader, e, higher_is_better), resolution)]
    if room is not None:
        open_ = [e for e in open_ if decidable(leader, e, room, resolution)]
    return [leader.config, *[e.config for e in open_]] if open_ else []
