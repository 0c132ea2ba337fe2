"""The verdict across configurations in words (pure: verdicts in, lines out), for the console after a sweep, for
`loadgen compare` and for the report's first screen: per prompt length and objective, the loads merged into
regions with one answer each ("b64t8 wins from c=1 to c=8 (+18 % to +24 %); at c=64 b16t8 and b32t8 are tied
(±4 %, within noise)"), the why of each region's winner, and who could not compete where."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from loadgen.report.text_table import DATASET
from loadgen.results.objectives import SPECS, Objective
from loadgen.results.verdict import RESOLUTION, Decision, Margin, Verdict
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


def interval_text(m: Margin | None) -> str:
    """'+26% [+2.7%, +55%]': a margin and its 95 % interval (asymmetric: a ratio's); '' without a margin."""
    if m is None:
        return ""
    return _pct(m.value) + ("" if m.interval is None else f" [{_pct(m.interval[0])}, {_pct(m.interval[1])}]")


def margin_text(v: Verdict) -> str:
    """The leader's margin over the runner-up with its interval (`interval_text`)."""
    return interval_text(v.margin)


def value_text(objective: Objective, x: float) -> str:
    """A figure as the answer quotes it: tok/s with one decimal, TTFT in ms, J/token with three decimals."""
    if objective is Objective.TTFT_P50_S:
        return f"{x * 1000:.1f} ms"
    return f"{x:.3f} J/token" if objective is Objective.J_PER_TOKEN else f"{x:.1f} tok/s"


def _compared(v: Verdict) -> str:
    """'93.9 vs 91.1 tok/s: ' — the leader's and the runner-up's figures the margin is taken from."""
    other = next((e for e in v.ranked if e.config == v.runner_up), None)
    if other is None:
        return ""
    lead = value_text(v.objective, v.ranked[0].value)
    return f"{lead.split()[0]} vs {value_text(v.objective, other.value)}: "


def _ahead(region: Region) -> str:
    """', ahead of no_draft by +25% [+20%, +30%]': how far a tie leads the best configuration it beats."""
    rests = [x.rest for x in region.verdicts if x.rest is not None]
    if not rests:
        return ""
    if len(region.verdicts) == 1:
        return f", ahead of {rests[0][0]} by {interval_text(rests[0][1])}"
    values = [m.value for _, m in rests]
    names = {name for name, _ in rests}
    return f", ahead of {names.pop() if len(names) == 1 else 'the rest'} by {_pct(min(values))} to {_pct(max(values))}"


def region_text(region: Region) -> str:
    """One region's answer: 'b64t8 wins at c=1 (2680.1 vs 1792.2 tok/s: +50% [+43%, +56%])', 'b64t8 wins from
    c=1 to c=8 (+18% to +24% over the runner-up)', 'at c=64 b16t8 and b32t8 are tied (+1.2% [−2.8%, +5.4%],
    within noise), ahead of b8t4 by +9.0% [+5.0%, +13%]', 'at c=128 only b16t8 was eligible', or 'at c=256 no
    configuration was eligible'."""
    v = region.verdicts[0]
    single = len(region.verdicts) == 1
    if v.decision is Decision.WINS:
        margins = [x.margin.value for x in region.verdicts if x.margin]
        span = _compared(v) + margin_text(v) if single else f"{_pct(min(margins))} to {_pct(max(margins))}"
        return f"{v.winner} wins {_loads(region)} ({span})"
    if v.decision is Decision.TIED:
        reasons = {x.tie_reason for x in region.verdicts}
        reason = "within noise" if "within noise" in reasons else f"below the {RESOLUTION:.0%} resolution"
        detail = f"{margin_text(v)}, " if single else ""
        return f"{_loads(region)} {_names(v.tied)} are tied ({detail}{reason}){_ahead(region)}"
    if v.decision is Decision.ALONE:
        return f"{_loads(region)} only {v.leader} was eligible"
    return f"{_loads(region)} no configuration was eligible"


def _context(ctx: int) -> str:
    return f"prompt {ctx} tokens" if ctx else DATASET


def ineligible_lines(verdicts: list[Verdict]) -> list[str]:
    """'b64t8 at c=32, c=64: client saturated: …' per configuration that could not compete somewhere (one
    reason for all its loads when they share it, else each load's own)."""
    by_config: dict[str, dict[str, str]] = {}
    for v in verdicts:
        for config, reason in v.ineligible:
            by_config.setdefault(config, {}).setdefault(v.load.text(), reason)
    out = []
    for config, reasons in by_config.items():
        if len(set(reasons.values())) == 1:
            out.append(f"{config} at {', '.join(reasons)}: {next(iter(reasons.values()))}")
        else:
            out.append(f"{config}: " + "; ".join(f"at {load}: {r}" for load, r in reasons.items()))
    return out


RULE = (f"A difference inside the 95 % intervals or below {RESOLUTION:.0%} is a tie, never a ranking; margins are "
        "the leader's over the runner-up, with their 95 % interval in brackets; output tok/s is sustained (the steady "
        "window's).")
HEAD = "The answer: which configuration serves best at each load. " + RULE


def noise_text(verdicts: list[Verdict]) -> str:
    """What the intervals hold beyond the requests' own noise: the noise between runs, and what measured it."""
    b = next((v.between for v in verdicts if v.objective is Objective.OUTPUT_TOK_S), None)
    if b is None or b.relative_se is None:
        return ("Noise between runs: not measured (no drift control, no configuration measured twice): "
                "one-measurement intervals hold the noise between requests only. Measure the sweep a second time "
                "and compare both together (loadgen compare A B): each configuration's measurements are pooled "
                "and their spread counted.")
    sources = [f"{n} {one if n == 1 else many}" for n, one, many in (
        (b.controls, "drift control", "drift controls"),
        (b.repeated, "configuration measured again", "configurations measured again")) if n]
    return (f"Noise between runs: ±{1.96 * b.effective_se:.1%} (95 %, {b.df} degrees of freedom) from "
            f"{' and '.join(sources)}, added to every interval.")


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
                    if r.verdicts[0].why is not None:
                        why = f"why {r.verdicts[0].load.text()}: {why_text(r.verdicts[0].why)}"
                        out += textwrap.wrap(why, width, initial_indent="    ", subsequent_indent="      ")
        for line in ineligible_lines(here):
            out += textwrap.wrap("could not compete: " + line, width, initial_indent="  ",
                                 subsequent_indent="      ")
    return out
