"""The verdict across configurations in words (pure: verdicts in, lines out), for the console after a sweep, for
`loadgen compare` and for the report's first screen: per prompt length and objective, the loads merged into
regions with one answer each ("b64t8 wins from c=1 to c=8 (+18 % to +24 %); at c=64 b16t8 and b32t8 are tied
(±4 %, within noise)"), the why of each region's winner, and who could not compete where."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from loadgen.report.text_table import DATASET
from loadgen.results.objectives import SPECS, Objective
from loadgen.results.verdict import RESOLUTION, Decision, Verdict
from loadgen.results.verdict_why import why_text


@dataclass
class Region:
    """Consecutive loads of one prompt length with the same answer for one objective."""

    verdicts: list[Verdict] = field(default_factory=list)

    def same(self, v: Verdict) -> bool:
        first = self.verdicts[0]
        return (first.decision, first.winner, sorted(first.tied)) == (v.decision, v.winner, sorted(v.tied))


def regions(verdicts: list[Verdict]) -> list[Region]:
    """`verdicts` of one prompt length and objective, in load order, merged where the answer is the same."""
    out: list[Region] = []
    for v in verdicts:
        if out and out[-1].same(v):
            out[-1].verdicts.append(v)
        else:
            out.append(Region([v]))
    return out


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%" if abs(x) < 0.1 else f"{x * 100:+.0f}%"


def _loads(region: Region) -> str:
    loads = [v.load.text() for v in region.verdicts]
    return f"at {loads[0]}" if len(loads) == 1 else f"from {loads[0]} to {loads[-1]}"


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def margin_text(v: Verdict) -> str:
    """'+9.2 % ± 3.1 %' (the 95 % interval's half-width), '+9.2 %' without an interval."""
    m = v.margin
    if m is None:
        return ""
    half = m.half_width()
    return _pct(m.value) + ("" if half is None else f" ± {abs(half) * 100:.1f}%")


def region_text(region: Region) -> str:
    """One region's answer: 'b64t8 wins from c=1 to c=8 (+18 % to +24 % over the runner-up)', 'at c=64 b16t8
    and b32t8 are tied (+1.2 % ± 4.0 %, within noise)', 'at c=128 only b16t8 was eligible', or 'at c=256 no
    configuration was eligible'."""
    v = region.verdicts[0]
    if v.decision is Decision.WINS:
        margins = [x.margin.value for x in region.verdicts if x.margin]
        span = margin_text(v) if len(region.verdicts) == 1 else f"{_pct(min(margins))} to {_pct(max(margins))}"
        return f"{v.winner} wins {_loads(region)} ({span})"
    if v.decision is Decision.TIED:
        reasons = {x.tie_reason for x in region.verdicts}
        reason = "within noise" if "within noise" in reasons else f"below the {RESOLUTION:.0%} resolution"
        detail = margin_text(v) if len(region.verdicts) == 1 else "margins"
        return f"{_loads(region)} {_names(v.tied)} are tied ({detail}, {reason})".replace("(margins, ", "(")
    if v.decision is Decision.ALONE:
        return f"{_loads(region)} only {v.leader} was eligible"
    return f"{_loads(region)} no configuration was eligible"


def _context(ctx: int) -> str:
    return f"prompt {ctx} tokens" if ctx else DATASET


def ineligible_lines(verdicts: list[Verdict]) -> list[str]:
    """'b64t8 at c=32, c=64: client saturated: …' per configuration that could not compete somewhere."""
    by_config: dict[str, tuple[list[str], str]] = {}
    for v in verdicts:
        for config, reason in v.ineligible:
            loads, first = by_config.setdefault(config, ([], reason))
            if v.load.text() not in loads:
                loads.append(v.load.text())
    return [f"{config} at {', '.join(loads)}: {reason}" for config, (loads, reason) in by_config.items()]


HEAD = (f"The answer: which configuration serves best at each load. A difference inside the 95 % intervals or "
        f"below {RESOLUTION:.0%} is a tie, never a ranking; margins are the leader's over the runner-up.")


def noise_text(verdicts: list[Verdict]) -> str:
    """What the intervals hold beyond the requests' own noise: the drift controls' noise between runs."""
    b = next((v.between for v in verdicts if v.objective is Objective.OUTPUT_TOK_S), None)
    if b is None or b.relative_se is None:
        return ("Noise between runs: not measured (no drift control in these results): one-measurement intervals "
                "hold the noise between requests only; --repeat 3 or --drift-check measures it.")
    return (f"Noise between runs: ±{1.96 * b.relative_se:.1%} (95 %) from {b.controls} drift control"
            f"{'s' * (b.controls != 1)}, added to every one-measurement interval.")


def verdict_lines(verdicts: list[Verdict], width: int = 120) -> list[str]:
    """The verdict as console lines: per prompt length, each objective's regions in one sentence, the why of
    each output tok/s region (at its first load), then who could not compete where."""
    if not verdicts:
        return []
    out = textwrap.wrap(HEAD + " " + noise_text(verdicts), width)
    for ctx in dict.fromkeys(v.load.context_tokens for v in verdicts):
        here = [v for v in verdicts if v.load.context_tokens == ctx]
        out.append(_context(ctx) + ":")
        for objective in Objective:
            mine = [v for v in here if v.objective is objective]
            if not mine:
                continue
            spec = SPECS[objective]
            found = regions(mine)
            sentence = f"{spec.title} ({'higher' if spec.higher_is_better else 'lower'} is better): " + \
                "; ".join(region_text(r) for r in found)
            out += textwrap.wrap(sentence, width, initial_indent="  ", subsequent_indent="      ")
            if objective is Objective.OUTPUT_TOK_S:
                for r in found:
                    if r.verdicts[0].why is not None and r.verdicts[0].decision is Decision.WINS:
                        why = f"why {r.verdicts[0].load.text()}: {why_text(r.verdicts[0].why)}"
                        out += textwrap.wrap(why, width, initial_indent="    ", subsequent_indent="      ")
        for line in ineligible_lines(here):
            out += textwrap.wrap("could not compete: " + line, width, initial_indent="  ",
                                 subsequent_indent="      ")
    return out
