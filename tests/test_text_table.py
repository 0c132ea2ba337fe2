"""The one text-table renderer: the matrix (headers naming figure and statistic, percentiles over few samples
marked), the open-loop table and compare (failed cells marked and never best; markdown bold for the best)."""

from __future__ import annotations

import pytest

from loadgen.results import compare, open_table, table
from loadgen.results.text_table import Column, field, header, line, pad

pytestmark = pytest.mark.unit

CLOSED = {"context_tokens": 1024, "concurrency": 32, "max_failed_fraction": 0.05,  # 1 of 64 failed: usable
          "requests": {"ok": 63, "failed": 1}, "output_tok_s": 4723.25,
          "steady": {"output_tok_s": 4790.04},
          "request_tok_s": {"mean": 147.61, "p10": 120.04, "samples": 63},
          "ttft_s": {"mean": 0.2514, "p50": 0.2, "p99": 1.0375, "samples": 63},
          "prefill_tok_s": 4072.9, "prefill_s": 0.2514, "e2e_s": {"mean": 1.9}, "tokens_per_chunk_mean": 3.86,
          "accept_length": {"value": 3.912, "source": "counters", "disagreement": "counters=3.91 vs log=4.50"},
          "power": {"mean_w_total": 3612.4, "j_per_output_token": 0.7648},
          "client": {"saturated": True, "reasons": ["client CPU 95% > 90%"]}, "warnings": ["w"], "status": "ok"}
OPEN = {"context_tokens": 60, "concurrency": 0, "request_rate": 40.0, "requests": {"ok": 24},
        "schedule_request_rate": 40.0, "achieved_request_rate": 29.31,
        "ttft_s": {"p50": 0.0123, "p99": 0.05}, "ttft_from_intended_s": {"p50": 0.2, "p99": None},
        "e2e_s": {"p50": 0.054, "p99": 0.06}, "e2e_from_intended_s": {"p50": 0.3, "p99": 0.5},
        "send_lateness_s": {"p50": 0.4466, "p99": 0.8673, "max": 0.8758}, "status": "failed", "error": "x"}


def test_matrix_table():
    # every header names its figure and statistic; percentiles over fewer than 100 requests carry "*"
    assert table.header() == (
        '   ctx  conc   ok/fail  out tok/s steady tok/s req tok/s mean  req p10 TTFT mean ms  TTFT p50  TTFT '
        'p99     n    pp ms  pp tok/s   E2E s tok/chk         accept       W   J/tok          GPU SM clk  DRAM '
        'tensor pwr cap bottleneck           note')
    assert table.row(CLOSED) == (
        '  1024    32      63/1     4723.2       4790.0          147.6   120.0*        251.4    200.0*   1037'
        '.5*    63    251.4      4073    1.90    3.86  3.91 counters    3612   0.765            -      -     - '
        '     -       - -                    sources disagree: counters=3.91 vs log=4.50 | CLIENT SATURATED (c'
        'lient CPU 95% > 90%) add --workers | w')
    assert table.row({"context_tokens": 60, "concurrency": 1}) == (
        '    60     1       0/0          -            -              -        -            -         -       '
        '  -     -        -         -       -       -              -       -       -            -      -     - '
        '     -       - -                    ')
    many = dict(CLOSED, requests={"ok": 300, "failed": 0}, ttft_s=dict(CLOSED["ttft_s"], samples=300),
                request_tok_s=dict(CLOSED["request_tok_s"], samples=300), warnings=[], client=None,
                accept_length=None, bottleneck="server_host",
                gpu_activity={"total": {"utilization_percent": 17.2, "dram_active": 0.1, "tensor_active": 0.02,
                                        "power_cap_fraction": 0.0}})
    assert table.row(many) == (
        '  1024    32     300/0     4723.2       4790.0          147.6    120.0        251.4     200.0    103'
        '7.5   300    251.4      4073    1.90    3.86              -    3612   0.765     17% host      -   10% '
        '    2%      0% server_host          ')


def test_matrix_names_its_run_and_explains_the_mark():
    text = table.table([CLOSED], table.title("base", "r1"))
    assert text.splitlines()[0] == "run r1  label base"
    assert text.splitlines()[-1] == ("* percentile over fewer than 100 requests (n): a p99 of n < 100 is close to "
                                     "their maximum; raise --requests-per-cell for a tail figure")
    many = dict(CLOSED, ttft_s=dict(CLOSED["ttft_s"], samples=300), request_tok_s={"samples": 300})
    assert table.table([many]).splitlines()[-1] == table.row(many)  # no legend without a mark
    assert table.title(None, "r1") == "run r1"


def test_open_loop_table():
    assert open_table.render([OPEN, CLOSED]) == "\n".join([
        'open loop — snd: from the actual send (uncorrected); int: from the intended send (corrected). TT'
        'FT and lateness in ms, E2E in s',
        '   ctx      rate/s  cap  sched/s  achvd/s   ok/fail TTFT50 snd      int TTFT99 snd      int E2E5'
        '0 snd     int E2E99 snd     int  late50  late99  lateMax note',
        '    60          40    -    40.00    29.31      24/0       12.3    200.0       50.0        -     '
        '0.054   0.300     0.060   0.500   446.6   867.3    875.8 FAILED: x',
    ])


def _runs():
    flaky = dict(CLOSED, output_tok_s=9999.0, requests={"ok": 54, "failed": 10, "by_outcome": {"ok": 54, "http_error": 10}})
    return [compare.Run("base", "a.json", {}, {compare.cell_key(CLOSED): CLOSED}),
            compare.Run("other-configuration-name", "b.json", {},
                        {compare.cell_key(CLOSED): dict(CLOSED, output_tok_s=5000.0), compare.cell_key(OPEN): OPEN}),
            compare.Run("flaky", "c.json", {}, {compare.cell_key(CLOSED): flaky})]


def test_compare_text_and_markdown():
    # the flaky configuration's 9999 tok/s is not the best: too many of its requests failed, so it is marked
    rows = compare.comparison(_runs(), 0)
    assert compare.render_text(rows) == "\n".join([
        '   ctx  conc configuration             out tok/s  vs base req tok/s mean  vs base  TTFT p50 ms  acce'
        'pt      W   J/tok note',
        '    60  40/s other-configuration-name          -        -              -        -            -      '
        ' -      -       - FAILED: x',
        '',
        '  1024    32 base (base)                 4723.2     1.00x         147.6*    1.00x       200.0*   3.9'
        '1*  3612*  0.765*',
        '             other-configuration-name    5000.0*    1.06x         147.6*    1.00x       200.0*   3.9'
        '1*  3612*  0.765*',
        '             flaky                             -        -              -        -            -      '
        ' -      -       - FAILED: 10 of 64 requests failed (15.6% > 0.05 --max-failed-fraction): 10 http_err'
        'or',
        '* best of the cell (highest tok/s and accept length; lowest TTFT, W and J/token); vs base = value / '
        "the baseline's",
    ])
    assert compare.render_markdown(rows) == "\n".join([
        '| ctx | conc | configuration | out tok/s | vs base | req tok/s mean | vs base | TTFT p50 ms | accept'
        ' | W | J/tok | note |',
        '|---|---|---|---|---|---|---|---|---|---|---|---|',
        '| 60 | 40/s | other-configuration-name | - | - | - | - | - | - | - | - | FAILED: x |',
        '| 1024 | 32 | base (base) | 4723.2 | 1.00x | **147.6** | 1.00x | **200.0** | **3.91** | **3612** | *'
        '*0.765** |  |',
        '| 1024 | 32 | other-configuration-name | **5000.0** | 1.06x | **147.6** | 1.00x | **200.0** | **3.91'
        '** | **3612** | **0.765** |  |',
        '| 1024 | 32 | flaky | - | - | - | - | - | - | - | - | FAILED: 10 of 64 requests failed (15.6% > 0.05'
        ' --max-failed-fraction): 10 http_error |',
        '',
        '**bold**: best of the cell (highest tok/s and accept length; lowest TTFT, W and J/token); vs base = '
        "value / the baseline's",
    ])


def test_alignment_and_missing_fields():
    cols = [Column("a", 4, str), Column("b", -4, str), Column("c", 0, str)]
    assert header(cols) == "   a b    c"
    assert line(cols, "x") == "   x x    x"
    assert pad("long text", 3) == "long text"  # a text wider than its column is never cut
    assert field({"a": {"b": 0}}, "a.b") == 0
    assert field({"a": None}, "a.b") is None and field({"a": 5}, "a.b") is None and field({}, "a") is None
