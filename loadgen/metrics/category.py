"""Figures per prompt category and the cell's achieved length distributions (pure functions of records).

A record's category is its dataset row's (`--dataset`, `--category-field`); records without one count under
`UNCATEGORISED`. Every per-category figure uses the same formula as the cell's own, over that category's
measured records; the cell's window is shared, so the categories' `output_tok_s` add up to the cell's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadgen.metrics.accept import accept_length_best
from loadgen.metrics.record_table import RecordTable, or_zero, present
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.stats import distribution, mean
from loadgen.record import Record

UNCATEGORISED = "(none)"
LENGTH_QUANTILES = (50, 90)


def length_distributions(ok: Sequence[Record] | RecordTable) -> dict:
    """Achieved prompt and output lengths over ok requests, from the server's usage counts:
    {prompt_tokens, output_tokens} each {mean, p50, p90} (prompt_tokens, completion_tokens of each record)."""
    t = RecordTable.of(ok)
    return {"prompt_tokens": distribution(present(t.ints("prompt_tokens")), LENGTH_QUANTILES),
            "output_tokens": distribution(present(t.ints("completion_tokens")), LENGTH_QUANTILES)}


def _none(labels: np.ndarray) -> np.ndarray:
    """True where a label is None."""
    return np.equal(labels, np.array(None, dtype=object))


def one_category(recs: Sequence[Record] | RecordTable, window_s: float, cell_output_tokens: int) -> dict:
    """One category's figures over its measured records (all outcomes):
    requests {ok, failed}; output_tokens = Σ completion_tokens(ok); output_tok_s = output_tokens / the cell's
    window; output_share = output_tokens / the cell's output tokens; request_tok_s {mean, p50} and ttft_s
    {mean, p50, p90} as for the cell; accept_length {value, source} (`accept_length_best`)."""
    t = RecordTable.of(recs)
    ok = t.ok()
    cols = RequestColumns.of(ok)
    tokens = cols.total("completion_tokens")
    rates = cols.request_tok_s()
    return {
        "requests": {"ok": len(ok), "failed": len(t) - len(ok)},
        "output_tokens": tokens,
        "output_tok_s": tokens / window_s if window_s > 0 else None,
        "output_share": tokens / cell_output_tokens if cell_output_tokens else None,
        "request_tok_s": {"mean": mean(rates), **{k: v for k, v in distribution(rates, (50,)).items() if k != "mean"}},
        "ttft_s": distribution(cols.ttft_s(), LENGTH_QUANTILES),
        "accept_length": accept_length_best(ok),
        "lengths": length_distributions(ok),
    }


def category_figures(recs: Sequence[Record] | RecordTable, window_s: float) -> dict | None:
    """{category: figures (`one_category`)} in sorted order, when any measured record has a category; else
    None (a synthetic cell has no categories)."""
    t = RecordTable.of(recs)
    if not t.any_value("category"):  # asked first: a synthetic cell keeps no column of Nones
        return None
    labels = t.labels("category")
    none = _none(labels)
    if none.all():
        return None
    names = np.where(none, UNCATEGORISED, labels).tolist()
    order = sorted(set(names))
    # each row's category as its index in `order`: one pass, however many categories a dataset has
    index = {name: i for i, name in enumerate(order)}
    codes = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    total = int(or_zero(t.ok().ints("completion_tokens")).sum())
    return {name: one_category(t.where(codes == i), window_s, total) for i, name in enumerate(order)}
