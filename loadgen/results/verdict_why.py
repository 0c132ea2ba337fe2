"""Why the leader of a verdict out-serves its runner-up, from measured figures only (definitions.md#verdict-why).

Output tok/s = accept length × verify steps/s (`metrics/verify_steps.py`), so the ratio of two configurations'
output tok/s is the accept-length ratio times the verify-steps/s ratio: "accept length ×3.5, verify steps/s
×0.45: net ×1.6". Beside it, what limits the leader's accept length (its full-draft share), the GPU's side
(power against its limit, the bottleneck verdict) where telemetry was taken, and the settings beyond the
speculative ones that differ between the two (confounders: CUDA graphs, overlap scheduling, max running
requests, parallelism, quantisation — each engine adapter's `speed_keys`, read from the server info the
results hold; a setting that is itself a swept parameter is no confounder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from loadgen.engines.registry import adapter
from loadgen.metrics import verify_steps as vs
from loadgen.names import Bottleneck
from loadgen.results.cell_result import CellResult
from loadgen.results.cell_view import catalog_figure, figure, number
from loadgen.results.objectives import sustained_output_tok_s

if TYPE_CHECKING:
    from loadgen.results.verdict import Configuration


@dataclass(frozen=True)
class SpecFigures:
    """One configuration's speculative figures at a load (the mean over its eligible measurements)."""

    output_tok_s: float | None
    accept_length: float | None
    accept_source: str | None
    verify_steps_per_s: float | None
    step_ms: float | None
    full_draft_share: float | None
    draft_positions: int | None
    power_fraction_of_limit: float | None
    bottleneck: str | None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


NO_DRAFT = "no speculative decoding"  # the accept source of a configuration that decodes one token a step


def speculates(conf: Configuration) -> bool:
    """Whether the configuration's server drafts: speculative settings in its server info (`target.spec`), or
    an accept length in some cell."""
    return any((r.doc.get("target") or {}).get("spec") for r in conf.runs) or any(
        number(c, "accept_length.value") is not None for r in conf.runs for c in r.cells.values())


def spec_figures(cells: Sequence[CellResult], drafts: bool = True) -> SpecFigures:
    """The figures of `SpecFigures` over a configuration's eligible cells at one load; a configuration that does
    not draft (`drafts` False) commits exactly one token a step: accept length 1."""
    out = _mean([sustained_output_tok_s(c) for c in cells])
    accept = _mean([number(c, "accept_length.value") for c in cells]) if drafts else 1.0
    positions = [figure(c, "accept_by_position") for c in cells]
    share = _mean([catalog_figure(c, "full_draft_share") for c in cells]) if drafts else None
    return SpecFigures(
        output_tok_s=out, accept_length=accept,
        accept_source=figure(cells[-1], "accept_length.source") if drafts else NO_DRAFT,
        verify_steps_per_s=vs.verify_steps_per_s(out, accept),
        step_ms=_mean([catalog_figure(c, "step_ms") for c in cells]),
        full_draft_share=share, draft_positions=max((len(p) for p in positions if p), default=None),
        power_fraction_of_limit=_mean([number(c, "power.power_fraction_of_limit") for c in cells]),
        bottleneck=cells[-1].gpu.bottleneck)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _settings(conf: Configuration) -> tuple[dict[str, Any], set[str]]:
    """(the speed settings of the configuration's server info, the names of its swept parameters)."""
    doc = conf.runs[-1].doc
    target = doc.get("target") or {}
    info = target.get("server_info") or {}
    keys = adapter(str(target.get("engine"))).speed_keys
    swept = {k for r in conf.runs for k in r.params}
    return {k: info[k] for k in keys if k in info}, swept


def confounders(configs: Sequence[Configuration]) -> list[str]:
    """'disable_cuda_graph: True for b64t8; False for b8t4, b16t8' for each speed setting that the compared
    servers that report it report differently, and that none of them swept."""
    settings = [(c.name, *_settings(c)) for c in configs]
    swept = {k for _, _, sw in settings for k in sw}
    out = []
    for key in dict.fromkeys(k for _, found, _ in settings for k in found):
        groups: dict[str, list[str]] = {}
        for name, found, _ in settings:
            if key in found:  # a server that does not report the setting says nothing of it: no difference
                groups.setdefault(repr(found[key]), []).append(name)
        if key not in swept and len(groups) > 1:
            shown = [f"{v.strip(chr(39))} for {', '.join(names)}" for v, names in groups.items()]
            out.append(f"{key}: {'; '.join(shown)}")
    return out


@dataclass(frozen=True)
class Why:
    """The leader against the runner-up: their figures, the ratios (leader / runner-up), the leader's draft
    limit, and the confounders among the configurations compared at the load."""

    leader: str
    runner_up: str
    configs: dict[str, SpecFigures]
    accept_ratio: float | None
    steps_ratio: float | None
    net_ratio: float | None
    limit: vs.DraftLimit
    confounders: list[str]
    tied: bool = False  # the verdict found the two within noise (or the resolution): no side "outweighs"

    def to_json(self) -> dict:
        return {"leader": self.leader, "runner_up": self.runner_up,
                "configs": {name: asdict(f) for name, f in self.configs.items()},
                "accept_ratio": self.accept_ratio, "steps_ratio": self.steps_ratio, "net_ratio": self.net_ratio,
                "limit": self.limit.value, "confounders": self.confounders, "tied": self.tied,
                "text": why_text(self)}


def explain(leader: Configuration, leader_cells: Sequence[CellResult], runner: Configuration,
            runner_cells: Sequence[CellResult], compared: Sequence[Configuration], tied: bool = False) -> Why:
    """The leader against the runner-up; confounders over every configuration `compared` at the load."""
    a, b = spec_figures(leader_cells, speculates(leader)), spec_figures(runner_cells, speculates(runner))
    accept, steps = _ratio(a.accept_length, b.accept_length), _ratio(a.verify_steps_per_s, b.verify_steps_per_s)
    return Why(leader.name, runner.name, {leader.name: a, runner.name: b}, accept, steps,
               _ratio(a.output_tok_s, b.output_tok_s),
               vs.DraftLimit.NO_DRAFT if a.accept_source == NO_DRAFT else vs.draft_limit(a.full_draft_share),
               confounders(compared), tied)


def _n(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def decomposition_text(w: Why) -> str:
    """'accept length 12.9 vs 3.7 (×3.49), verify steps/s 1920 vs 4250 (×0.45; 15.2 vs 6.9 ms a step, drafting
    and verifying): net ×1.58'; without an accept length, whose is missing."""
    a, b = w.configs[w.leader], w.configs[w.runner_up]
    if w.accept_ratio is None or w.steps_ratio is None:
        missing = [n for n, f in w.configs.items() if f.accept_length is None]
        return f"no accept length reported for {' and '.join(missing) or 'either'}: no decomposition"
    step = f"; {_n(a.step_ms)} vs {_n(b.step_ms)} ms a step, drafting and verifying" if a.step_ms and b.step_ms else ""
    return (f"accept length {_n(a.accept_length, '.2f')} vs {_n(b.accept_length, '.2f')} (×{w.accept_ratio:.2f}), "
            f"verify steps/s {_n(a.verify_steps_per_s, '.0f')} vs {_n(b.verify_steps_per_s, '.0f')} "
            f"(×{w.steps_ratio:.2f}{step}): net ×{_n(w.net_ratio, '.2f')} output tok/s")


SAME = 0.01  # ratios within 1 % of 1 read as "the same"


def reason_text(w: Why) -> str:
    """Which side of the product decided the output tok/s, in words, read from the net first: a leader that
    delivers less output (it leads by per-request speed or goodput) is not said to outweigh anything."""
    a, s, net = w.accept_ratio, w.steps_ratio, w.net_ratio
    if a is None or s is None or net is None:
        return ""
    if w.tied:
        return (f"tied: {w.leader}'s ×{a:.2f} accept length against its ×{s:.2f} verify steps/s leave the output "
                "within noise of each other")
    if abs(net - 1) < SAME:
        return "the same output tok/s: the longer accepted drafts and the faster verify steps cancel out"
    if net < 1:
        return f"{w.leader} delivers ×{net:.2f} the output tok/s of {w.runner_up}: it leads here, not by throughput"
    plain = [name for name, f in w.configs.items() if f.accept_source == NO_DRAFT]
    if plain == [w.leader]:
        return (f"{w.leader}'s plain decode steps come ×{s:.2f} as often as {w.runner_up}'s drafting and "
                f"verifying, more than {w.runner_up}'s ×{1 / a:.2f} tokens a step make up: drafting does not pay here")
    if plain == [w.runner_up]:
        return (f"drafting pays: {w.leader}'s ×{a:.2f} tokens a step outweigh its steps coming ×{s:.2f} as often "
                f"as {w.runner_up}'s plain decode steps")
    if abs(a - 1) < SAME:
        return f"the same accept length; {w.leader}'s verify steps are faster"
    if a > 1 > s:
        return f"{w.leader}'s longer accepted drafts outweigh its slower verify steps"
    if s > 1 > a:
        return (f"{w.leader}'s faster verify steps outweigh {w.runner_up}'s longer accepted drafts: the larger "
                "draft costs more than its extra tokens")
    return f"{w.leader} is ahead on both: longer accepted drafts and faster verify steps"


def limit_text(w: Why) -> str:
    """What limits the leader's accept length, from its full-draft share."""
    f = w.configs[w.leader]
    if w.limit is vs.DraftLimit.NO_DRAFT:
        return f"{w.leader} decodes without a draft"
    if w.limit is vs.DraftLimit.UNKNOWN:
        return f"{w.leader}'s full-draft share: not reported by the server"
    share = f"{f.full_draft_share:.0%} of {w.leader}'s verify steps accepted the whole draft"
    if w.limit is vs.DraftLimit.DRAFT_SIZE:
        return f"{share}: the draft's size binds its accept length, a larger budget or depth has room"
    if w.limit is vs.DraftLimit.DRAFTER:
        return f"{share}: the drafter limits its accept length, a larger budget mostly adds verify cost"
    return f"{share}: both the draft's size and the drafter limit its accept length"


def gpu_text(w: Why) -> str:
    f = w.configs[w.leader]
    power = "" if f.power_fraction_of_limit is None else f"GPU power {f.power_fraction_of_limit:.0%} of its limit"
    neck = f"bottleneck {f.bottleneck}" if f.bottleneck and f.bottleneck != Bottleneck.UNKNOWN else ""
    return ", ".join(p for p in (power, neck) if p)


def why_text(w: Why) -> str:
    """The why in one paragraph: decomposition, reason, draft limit, GPU, confounders."""
    parts = [f"{w.leader} against {w.runner_up}: {decomposition_text(w)}", reason_text(w), limit_text(w),
             gpu_text(w)]
    if w.confounders:
        parts.append("confounders (engine settings beyond the swept ones differ): " + " | ".join(w.confounders))
    return ". ".join(p for p in parts if p) + "."
