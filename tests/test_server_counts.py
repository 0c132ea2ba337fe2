"""Cached prompt tokens, llama.cpp's draft counts and its accept-length sources, as tables: the cell sums, the
prefill rate over uncached tokens, the `llamacpp:` counters (vLLM's formula) on llama-server's own
`/metrics`, its log line, and the chunks source refused on a server that streams one event per token."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.metrics.accept import accept_length_per_request
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.request import prefill_tok_s
from loadgen.metrics.server_counts import (
    cached_fraction,
    cached_tokens,
    draft_tokens,
    one_event_per_token,
    per_token_counts,
)
from loadgen.metrics.telemetry import accept_length
from loadgen.record import CellKey, Record
from loadgen.run.record_columns import RecordColumns
from loadgen.telemetry.accept_log import parse_llama_line
from loadgen.telemetry.engine_metrics import WANTED
from loadgen.telemetry.promtext import parse_samples
from loadgen.telemetry.server_metrics import ServerMetricsSource

pytestmark = pytest.mark.unit

LLAMA_METRICS = Path(__file__).parent / "fixtures" / "llamacpp-metrics.txt"


def rec(prompt=60, cached=None, completion=32, chunks=32, spec=None, chunk_tokens=None, ttft_s=0.5) -> Record:
    return Record("run", CellKey(60, 1), 0, t_sent_ns=1, t_first_token_ns=1 + int(ttft_s * 1e9), t_end_ns=2 * 10**9,
                  prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion, chunks=chunks,
                  chunk_tokens=chunk_tokens, spec=spec)


def test_cached_tokens_are_summed_over_the_requests_that_report_them():
    ok = [rec(cached=20), rec(cached=0), rec(cached=None)]
    assert cached_tokens(ok) == 20
    assert cached_fraction(ok) == pytest.approx(20 / 120)
    assert cached_tokens([rec()]) is None and cached_fraction([rec()]) is None


def test_prefill_rate_counts_only_the_tokens_the_server_computed():
    assert prefill_tok_s(rec(prompt=60, cached=20, ttft_s=0.5)) == pytest.approx(80.0)
    assert prefill_tok_s(rec(prompt=60, cached=None, ttft_s=0.5)) == pytest.approx(120.0)
    assert prefill_tok_s(rec(prompt=60, cached=60, ttft_s=0.5)) is None  # nothing computed: no rate


def test_draft_tokens_of_llamacpp_timings():
    ok = [rec(spec={"draft_n": 24, "draft_n_accepted": 24}), rec(spec={"draft_n": 8, "draft_n_accepted": 2}),
          rec(spec={"spec_verify_ct": 4})]
    assert draft_tokens(ok) == {"proposed": 32, "accepted": 26, "accept_rate": 26 / 32, "requests": 2}
    assert draft_tokens([rec()]) is None


def test_a_spec_count_is_the_int_of_a_number_and_anything_else_is_not_one():
    """int() truncates a float count and reads a bool as 0 or 1; a count that is not a number is left out, from
    the records and from the columns a long cell keeps alike."""
    ok = [rec(completion=10, spec={"spec_verify_ct": 2.7, "draft_n": 9.9, "draft_n_accepted": 2.5}),
          rec(completion=6, spec={"spec_verify_ct": True, "draft_n": 4}),
          rec(completion=50, spec={"spec_verify_ct": "3", "draft_n": "5", "draft_n_accepted": 5}),
          rec(completion=40, spec={"spec_verify_ct": 0, "draft_n": None}), rec(completion=7, spec=None)]
    kept = RecordColumns()
    for r in ok:
        kept.append(r)
    try:
        for given in (ok, RecordTable.of(ok), kept.table()):
            assert accept_length_per_request(given) == 16 / 3
            assert draft_tokens(given) == {"proposed": 13, "accepted": 2, "accept_rate": 2 / 13, "requests": 2}
    finally:
        kept.close()


def test_per_chunk_counts_of_a_table_of_records():
    ok = [rec(completion=4, chunks=4, chunk_tokens=[1, 1, 1, 1]), rec(completion=9, chunks=3, chunk_tokens=None),
          rec(completion=1, chunks=1, chunk_tokens=[3])]
    assert per_token_counts(RecordTable.of(ok)) == per_token_counts(ok) == (1, True)
    ok.append(rec(completion=5, chunks=2, chunk_tokens=[1, 4]))
    assert per_token_counts(RecordTable.of(ok)) == (2, False)


@pytest.mark.parametrize("ok, per_token", [
    ([rec(completion=32, chunks=30)], True),  # llama.cpp: a few events held two tokens (split characters)
    ([rec(completion=32, chunks=8, chunk_tokens=[1, 5, 5, 5, 5, 5, 5, 1])], False),  # a step per chunk
    ([rec(completion=4, chunks=4, chunk_tokens=[1, 1, 1, 1])], True),  # running counts say one each
    ([rec(completion=1, chunks=1)], False),  # one chunk tells nothing
])
def test_one_event_per_token(ok, per_token):
    assert one_event_per_token(ok) is per_token


def test_chunks_are_not_an_accept_length_on_a_per_token_server():
    summary = {"accept_length_chunks": 1.03, "one_event_per_token": True,
               "draft_tokens": {"proposed": 24, "accepted": 24, "accept_rate": 1.0, "requests": 1}}
    acc = accept_length(summary, [])
    assert acc["value"] is None and "chunks" not in acc["per_source"]
    assert "one event per token" in acc["unavailable"]["chunks"]
    assert "24 accepted of 24 proposed" in acc["unavailable"]["per_request"]
    assert accept_length({"accept_length_chunks": 3.5}, [])["per_source"] == {"chunks": 3.5}


def test_llamacpp_counters_give_vllms_formula_on_llama_servers_own_metrics():
    before = LLAMA_METRICS.read_text()  # after one request: 6 drafts, 24 draft tokens, 24 accepted
    after = before.replace("num_drafts_total 6", "num_drafts_total 16").replace(
        "num_draft_tokens_total 24", "num_draft_tokens_total 64").replace(
        "num_accepted_tokens_total 24", "num_accepted_tokens_total 54")
    src = ServerMetricsSource("http://127.0.0.1:1/metrics")
    src.ingest(parse_samples(before, WANTED), 0)
    src.ingest(parse_samples(after, WANTED), 10**9)
    res = src.result()
    assert res.values["per_source"]["counters"] == pytest.approx(1 + 30 / 10)
    assert res.values["llamacpp"] == {"drafts": 10, "accepted_tokens": 30, "draft_tokens": 40,
                                      "accept_rate": 0.75}
    assert res.values["unavailable"]["gauge"] == "llama.cpp exports no accept-length gauge"


@pytest.mark.parametrize("line, parsed", [
    ("slot print_timing: id  0 | task 7 | draft acceptance = 1.00000 (   24 accepted /    24 generated), "
     "mean len =  5.00", (5.0, 6)),
    ("draft acceptance = 0.57500 (  230 accepted /   400 generated), mean len =  3.30", (3.3, 100)),
    ("draft acceptance = 0.00000 (    0 accepted /     8 generated), mean len =  1.00", (1.0, 8)),
    ("slot print_timing: id  0 | task 7 |        eval time =      90.12 ms /    32 tokens", None),
])
def test_llamacpp_log_line(line, parsed):
    assert parse_llama_line(line) == parsed
