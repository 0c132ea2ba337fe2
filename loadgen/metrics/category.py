"""Figures per prompt category and the cell's achieved length distributions (pure functions of records).

A record's category is its dataset row's (`--dataset`, `--category-field`); records without one count under
`UNCATEGORISED`. Every per-category figure uses the same formula as the cell's own, over that category's
measured records; the cell's window is shared, so the categories' `output_tok_s` add up to the cell's.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.accept import accept_length_best
from loadgen.metrics.request import request_tok_s, ttft_s
from loadgen.metrics.stats import distribution, mean
from loadgen.record import Record

UNCATEGORISED = "(none)"
LENGTH_QUANTILES = (50, 90)


def _present(values) -> list:
    return [x for x in values if x is not None]


def length_distributions(ok: Sequence[Record]) -> dict:
    """Achieved prompt and output lengths over ok requests, from the server's usage counts:
    {prompt_tokens, output_tokens} each {mean, p50, p90} (prompt_tokens, completion_tokens of each record)."""
    return {"prompt_tokens": distribution(_present(r.prompt_tokens for r in ok), LENGTH_QUANTILES),
            "output_tokens": distribution(_present(r.completion_tokens for r in ok), LENGTH_QUANTILES)}


def category_of(rec: Record) -> str:
    return rec.category if rec.category is not None else UNCATEGORISED


def one_category(recs: Sequence[Record], window_s: float, cell_output_tokens: int) -> dict:
    """One category's figures over its measured records (all outcomes):
    requests {ok, failed}; output_tokens = Σ completion_tokens(ok); output_tok_s = output_tokens / the cell's
    window; output_share = output_tokens / the cell's output tokens; request_tok_s {mean, p50} and ttft_s
    {mean, p50, p90} as for the cell; accept_length {value, source} (`accept_length_best`)."""
    ok = [r for r in recs if r.ok]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    rates = _present(request_tok_s(r) for r in ok)
    return {
        "requests": {"ok": len(ok), "failed": len(recs) - len(ok)},
        "output_tokens": tokens,
        "output_tok_s": tokens / window_s if window_s > 0 else None,
        "output_share": tokens / cell_output_tokens if cell_output_tokens else None,
        "request_tok_s": {"mean": mean(rates), **{k: v for k, v in distribution(rates, (50,)).items() if k != "mean"}},
        "ttft_s": distribution(_present(ttft_s(r) for r in ok), LENGTH_QUANTILES),
        "accept_length": accept_length_best(ok),
        "lengths": length_distributions(ok),
    }


def category_figures(recs: Sequence[Record], window_s: float) -> dict | None:
    """{category: figures (`one_category`)} in sorted order, when any measured record has a category; else
    None (a synthetic cell has no categories)."""
    if not any(r.category is not None for r in recs):
        return None
    groups: dict[str, list[Record]] = {}
    for r in recs:
        groups.setdefault(category_of(r), []).append(r)
    total = sum(r.completion_tokens or 0 for r in recs if r.ok)
    return {name: one_category(groups[name], window_s, total) for name in sorted(groups)}
