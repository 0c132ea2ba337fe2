"""The columnar per-request figures (`metrics.request_columns`) are bit-for-bit the one-record functions of
`metrics.request`, in record order, on a table of records with the fields that make a figure absent (no first
token, one token, a zero span, an unsent request, no last-token time, cached prompts); and `summarize`, which
reads them, gives the figures the one-record functions give."""

from __future__ import annotations

import random

import numpy as np
import pytest

from loadgen.metrics import request
from loadgen.metrics.cell import summarize
from loadgen.metrics.request_columns import RequestColumns
from loadgen.metrics.stats import distribution, mean
from loadgen.names import Outcome
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit

MS = 1_000_000
CELL = CellKey(context_tokens=60, concurrency=4)


def make(seq: int, **kw) -> Record:
    t0 = 19_192_005_793_542 + seq * 97 * MS + seq * 13
    base = {"run_id": "r1", "cell": CELL, "seq": seq, "t_intended_ns": t0, "t_sent_ns": t0 + 2 * MS + seq,
            "t_first_token_ns": t0 + 252 * MS + 7 * seq, "t_last_token_ns": t0 + 1_252 * MS + 3 * seq,
            "t_end_ns": t0 + 1_260 * MS + 11 * seq, "prompt_tokens": 60, "completion_tokens": 11 + seq % 5,
            "chunks": 3, "chunk_tokens": [1, 4, 6], "chunk_gaps_ns": [400 * MS, 600 * MS]}
    return Record(**{**base, **kw})


def table() -> list[Record]:
    recs = [make(i) for i in range(40)]
    t = recs[0].t_sent_ns
    recs += [
        make(40, t_first_token_ns=None, t_last_token_ns=None),  # no content token
        make(41, completion_tokens=1),  # no decode rate
        make(42, completion_tokens=None, chunks=0),
        make(43, t_last_token_ns=None),  # the rate from t_end
        make(44, t_last_token_ns=0),
        make(45, t_first_token_ns=t + 5 * MS, t_last_token_ns=t + 5 * MS),  # zero span
        make(46, t_sent_ns=0, t_end_ns=0, t_first_token_ns=None, outcome=Outcome.CONNECTION_ERROR),  # never sent
        make(47, t_intended_ns=0),
        make(48, cached_tokens=60),  # nothing computed: no prefill rate
        make(49, cached_tokens=20, prompt_tokens=None),
        make(50, t_first_token_ns=t + 2 * MS, t_sent_ns=t + 2 * MS),  # TTFT 0
        make(51, t_sent_ns=t - 3 * MS, t_intended_ns=t),  # sent early: lateness clipped at 0
    ]
    random.Random(3).shuffle(recs)
    return recs


FIGURES = ("ttft_s", "ttft_from_intended_s", "e2e_s", "e2e_from_intended_s", "send_lateness_s", "request_tok_s",
           "tpot_s", "prefill_tok_s")


@pytest.mark.parametrize("name", FIGURES)
def test_each_figure_is_the_one_record_function(name):
    recs = table()
    one = [v for v in (getattr(request, name)(r) for r in recs) if v is not None]
    columnar = getattr(RequestColumns.of(recs), name)().tolist()
    assert columnar == one
    assert all(type(a) is type(b) for a, b in zip(columnar, one))


def test_counts_and_rows():
    recs = table()
    cols = RequestColumns.of(recs)
    assert cols.total("completion_tokens") == sum(r.completion_tokens or 0 for r in recs)
    assert cols.present("prompt_tokens") == [r.prompt_tokens for r in recs if r.prompt_tokens is not None]
    ok = [r.ok for r in recs]
    assert cols.where(np.array(ok)).e2e_s().tolist() == [request.e2e_s(r) for r in recs if r.ok]
    assert len(RequestColumns.of([])) == 0 and RequestColumns.of([]).ttft_s().tolist() == []


def test_summarize_reads_the_same_figures():
    recs = table()
    ok = [r for r in recs if r.ok]
    s = summarize(recs)
    assert s["ttft_s"] == distribution([request.ttft_s(r) for r in ok if r.t_first_token_ns is not None])
    assert s["tpot_s"] == distribution([v for v in map(request.tpot_s, ok) if v is not None])
    assert s["prefill_tok_s"] == mean([v for v in map(request.prefill_tok_s, ok) if v is not None])
    lateness = [v for v in map(request.send_lateness_s, recs) if v is not None]
    assert s["send_lateness_s"] == distribution(lateness, (50, 99)) | {"max": max(lateness)}
    window = (max(r.t_end_ns for r in recs) - min(r.t_sent_ns for r in recs)) / 1e9
    assert s["duration_s"] == window
    assert s["achieved_concurrency"] == sum(request.e2e_s(r) for r in recs) / window
    assert s["output_tokens"] == sum(r.completion_tokens or 0 for r in ok)
    assert s["tokens_per_chunk_mean"] == s["output_tokens"] / sum(r.chunks for r in ok)


# the modules that compute per-request figures: each calls `request.py`'s formulas, none writes one of its own
READERS = ("loadgen/metrics/request_columns.py", "loadgen/metrics/slo.py", "loadgen/metrics/chunk_fold.py",
           "loadgen/metrics/open_loop.py", "loadgen/metrics/oversaturation.py", "exporters/live.py")


def _divisions_by_a_second(path: str) -> list[int]:
    """The lines of `path` that divide by NS or 1e9 (a time turned into seconds: the start of a formula)."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[1] / path).read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and (isinstance(node.right, ast.Name) and node.right.id == "NS"
                 or isinstance(node.right, ast.Constant) and node.right.value == 1e9)]


@pytest.mark.parametrize("path", READERS)
def test_no_per_request_formula_is_written_twice(path):
    # oversaturation's own figure (the cell's span, not a request's) is the one division it may hold
    allowed = 1 if path.endswith("oversaturation.py") else 0
    assert len(_divisions_by_a_second(path)) <= allowed, (path, _divisions_by_a_second(path))


def test_the_formulas_read_alike_on_one_record_and_on_columns():
    recs = table()
    cols = RequestColumns.of(recs)
    tokens = np.array([r.completion_tokens or 0 for r in recs], dtype=np.int64)
    spans = np.array([r.t_end_ns - r.t_sent_ns for r in recs], dtype=np.int64)
    for formula, args in ((request.latency_s, (cols.t_end_ns, cols.t_sent_ns)),
                          (request.lateness_s, (cols.t_sent_ns, cols.t_intended_ns)),
                          (request.decode_rate, (tokens, spans / 1e9 + 1)),
                          (request.token_gap_s, (spans, tokens + 1))):
        columns = formula(*args)
        ones = [formula(*(int(a[i]) if a.dtype.kind == "i" else float(a[i]) for a in args)) for i in range(len(recs))]
        assert columns.tolist() == ones, formula.__name__
