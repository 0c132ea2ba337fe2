"""The one text-table renderer: the matrix (headers naming figure and statistic, percentiles over few samples
marked), the open-loop table and compare (failed cells marked and never best; markdown bold for the best)."""

from __future__ import annotations

import pytest

from loadgen.report import compare, open_table, table
from loadgen.report.text_table import Column, field, header, line, pad
from loadgen.results.cell_result import from_json
from tests.cells import typed

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
    # every header names its figure and statistic; percentiles over fewer than 100 requests carry "*"; the wide
    # table has every column, each note in its row
    assert table.header() == (
        '   ctx  conc   ok/fail runs  out tok/s    ±95% steady tok/s req tok/s mean    ±req  req p10 TTFT mean ms'
        ' TTFT p50 ms    ±p50 TTFT p99 ms  pp tok/s  E2E s tok/chk accept source      ms/step      W   J/tok     GPU% '
        'SM clk '
        ' DRAM tensor pwr cap bottleneck           note')
    assert table.row(typed(CLOSED)) == (
        '  1024    32      63/1    1     4723.2       -       4790.0          147.6       -   120.0*        251.4'
        '      200.0*       -     1037.5*      4073   1.90    3.86   3.91 counters          -   3612   0.765        -'
        '      -     -      -       - -                    sources disagree: counters=3.91 vs log=4.50 | CLIENT SATURATED'
        ' (client CPU 95% > 90%): add --workers auto (client processes share the load) | w')
    assert table.row(typed({"context_tokens": 60, "concurrency": 1})) == (
        '    60     1       0/0    1          -       -            -              -       -        -            -'
        '           -       -           -         -      -       -      - -                 -      -       -        - '
        '     -     -      -       - -                    ')
    wide = table.table([typed(CLOSED)], wide=True).splitlines()
    assert wide[:2] == [table.header(), table.row(typed(CLOSED)).rstrip()]  # the wide rows: every column, each note
    assert " ".join(w.strip() for w in wide[2:]) == table.footnote([typed(CLOSED)])  # the legend wrapped, never cut
    assert all(len(w) <= 120 for w in wide[2:])


def test_matrix_names_its_run_numbers_its_notes_and_explains_the_mark():
    assert table.table([typed(CLOSED)], table.title("base", "r1")).splitlines() == [
        "run r1  label base",
        "   ctx  conc   ok/fail  out tok/s    ±95% req tok/s mean TTFT p50 ms TTFT p99 ms  E2E s accept   J/tok     "
        "GPU% note",
        "  1024    32      63/1     4723.2       -          147.6      200.0*     1037.5*   1.90   3.91   0.765        "
        "- n1",
        "n1 ctx 1024 conc 32: sources disagree: counters=3.91 vs log=4.50 | CLIENT SATURATED (client CPU 95% > 90%): add",
        "    --workers auto (client processes share the load) | w",
        "* percentile computed from fewer than 100 samples (requests with that figure): a p99 of fewer than 100 is "
        "close to their",
        "  maximum; raise --requests-per-cell for a tail figure",
    ]
    many = dict(CLOSED, ttft_s=dict(CLOSED["ttft_s"], samples=300), request_tok_s={"samples": 300}, warnings=[],
                client=None, accept_length=None, intervals={"output_tok_s": [4700.0, 4746.5]})
    lines = table.table([typed(many)]).splitlines()
    assert lines[1] == ("  1024    32      63/1     4723.2   ±23.2              -       200.0      1037.5   1.90      "
                        "-   0.765        -")
    assert lines[2].startswith("±95%: half-width of the 95 % confidence interval of out tok/s")  # no "*" legend
    assert table.title(None, "r1") == "run r1"


def test_open_loop_table():
    assert open_table.render([typed(OPEN), typed(CLOSED)]) == "\n".join([
        'open loop — snd: from the actual send (uncorrected); int: from the intended send (corrected).',
        'TTFT and lateness in ms, E2E in s',
        '   ctx      rate/s  cap  achvd/s   ok/fail TTFT50 snd      int TTFT99 snd      int E2E99 snd     int  lat'
        'e99 note',
        '    60          40    -    29.31      24/0       12.3    200.0       50.0        -     0.060   0.500   86'
        '7.3 n1',
        'n1 ctx 60 rate 40/s: FAILED: x',  # numbered below the rows, so a long note never widens them
    ])
    assert open_table.render([typed(OPEN)], wide=True).splitlines()[2] == (
        '   ctx      rate/s  cap  sched/s  achvd/s   ok/fail TTFT50 snd      int TTFT99 snd      int E2E50 snd     '
        'int E2E99 snd     int  late50  late99  lateMax note')


def _runs():
    flaky = dict(CLOSED, output_tok_s=9999.0, requests={"ok": 54, "failed": 10, "by_outcome": {"ok": 54, "http_error": 10}})
    return [compare.Run("base", "a.json", {}, {compare.cell_key(CLOSED): typed(CLOSED)}),
            compare.Run("other-configuration-name", "b.json", {},
                        {compare.cell_key(CLOSED): typed(dict(CLOSED, output_tok_s=5000.0)),
                         compare.cell_key(OPEN): typed(OPEN)}),
            compare.Run("flaky", "c.json", {}, {compare.cell_key(CLOSED): typed(flaky)})]


def test_compare_text_and_markdown():
    # the flaky configuration's 9999 tok/s is not the best: too many of its requests failed, so it is marked;
    # the other's 5000 tok/s is not either: its client was saturated (measured: shown, marked !); no margin is
    # taken against either, so base, the one configuration left, is alone and marked nothing; notes are
    # numbered under the rows
    runs = _runs()
    runs[0].cells[compare.cell_key(CLOSED)] = from_json(dict(CLOSED, client=None))
    rows = compare.comparison(runs, 0)
    assert compare.render_text(rows) == "\n".join([
        # W (122 columns with it) is left out of the text table to fit 120; the Markdown table keeps it
        '   ctx  conc configuration             out tok/s  vs base req tok/s mean  vs base  TTFT p50 ms  acce'
        'pt   J/tok note',
        '    60  40/s other-configuration-name          -        -              -        -            -      '
        ' -       - n1',
        '',
        '  1024    32 base (base)                 4723.2     1.00x         147.6     1.00x       200.0    3.9'
        '1   0.765',
        '             other-configuration-name    5000.0!    1.06x         147.6!    1.00x       200.0!   3.9'
        '1!  0.765! n2',
        '             flaky                             -        -              -        -            -      '
        ' -       - n3',
        'n1 ctx 60 conc 40/s other-configuration-name: FAILED: x',
        'n2 ctx 1024 conc 32 other-configuration-name: never best: client saturated: client CPU 95% > 90%',
        'n3 ctx 1024 conc 32 flaky: FAILED: 10 of 64 requests failed (15.6% > 0.05 --max-failed-fraction): 10 '
        'http_error',
        "* best of the cell beyond noise (highest tok/s; lowest TTFT, W and J/token; its margin over every other'"
        "s 95 % interval",
        "clear of 0 and ≥ 2%); ~ tied for the lead (within noise or below 2%): no best named; vs base = value /"
        " the baseline's",
        '! measured, but the cell failed a check (client saturated): its figures are shown and never best; th'
        'e note says why',
    ])
    md = compare.render_markdown(rows).splitlines()
    assert md[3] == '| 1024 | 32 | base (base) | 4723.2 | 1.00x | 147.6 | 1.00x | 200.0 | 3.91 | 3612 | 0.765 |  |'
    assert md[-2].startswith("**bold**: best of the cell beyond noise") and md[-1].startswith("! measured, but")


def test_alignment_and_missing_fields():
    cols = [Column("a", 4, str), Column("b", -4, str), Column("c", 0, str)]
    assert header(cols) == "   a b    c"
    assert line(cols, "x") == "   x x    x"
    assert pad("long text", 3) == "long text"  # a text wider than its column is never cut
    assert field({"a": {"b": 0}}, "a.b") == 0
    assert field({"a": None}, "a.b") is None and field({"a": 5}, "a.b") is None and field({}, "a") is None


def test_gpu_columns_show_busy_share_and_verdict():
    from loadgen.report.gpu_columns import WIDE_COLUMNS, busy_and_bottleneck
    cell = typed({"bottleneck": "server_host", "gpu_activity": {"total": {
        "utilization_percent": 17.2, "sm_clock_fraction": 0.99, "dram_active": 0.1, "tensor_active": 0.02,
        "power_cap_fraction": 0.0}}})
    assert busy_and_bottleneck(cell) == "17 host"
    assert [c.text(cell) for c in WIDE_COLUMNS] == ["99%", "10%", "2%", "0%", "server_host"]
    assert busy_and_bottleneck(typed({"bottleneck": "client", "client": {"saturated": True}})) == "clnt"
    assert busy_and_bottleneck(typed({})) == "-"
    assert busy_and_bottleneck(typed({"bottleneck": "gpu_compute", "gpu_activity": {"total": {"gr_engine_active": 1.0}}})) == "100 comp"
