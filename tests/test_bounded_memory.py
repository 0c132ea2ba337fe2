"""Bounded memory for long cells: the relative-error sketch against exact percentiles, the per-chunk fold
against the per-record formulas, and a cell's summary from kept records (chunks folded and spilled) against
the summary of the same records whole."""

from __future__ import annotations

import copy
import random
import resource
import socket
import subprocess
import sys

import numpy as np
import pytest

from loadgen.errors import UsageError
from loadgen.metrics.cell import summarize
from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.request import itl_pairs
from loadgen.metrics.sketch import ALPHA, BoundedDistribution, RelativeSketch
from loadgen.metrics.stats import distribution, weighted_distribution, weighted_percentiles, weighted_sum
from loadgen.metrics.steps import step_groups
from loadgen.names import Outcome
from loadgen.parallel.open_files import check_open_files, streams_per_process, workers_needed
from loadgen.record import CellKey, Record, chunks_elsewhere, request_id_for
from loadgen.run.chunk_spill import CellRecords
from loadgen.run.record_columns import RecordColumns
from tests.conftest import ROOT

QS = (0, 1, 10, 50, 90, 99, 99.9, 100)


@pytest.mark.unit
@pytest.mark.parametrize("weighted", [False, True])
def test_sketch_percentiles_within_alpha_of_the_exact_inverted_cdf(weighted):
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(-5, 1.5, 200_000), np.zeros(300), [1e-9, 900.0]])
    weights = rng.integers(1, 9, len(values)).astype(float) if weighted else np.ones(len(values))
    sketch = RelativeSketch()
    for part in np.array_split(np.arange(len(values)), 37):  # added in batches, as a cell adds them
        sketch.add(values[part], weights[part])
    exact = weighted_percentiles(values, weights, QS)
    for q, got, want in zip(QS, sketch.percentiles(QS), exact):
        assert abs(got - want) <= ALPHA * want, (q, got, want)
    assert sketch.mean() == pytest.approx(np.dot(values, weights) / weights.sum(), rel=1e-12)
    assert sketch.total == weights.sum()
    assert sketch.counts.size < 20_000  # bounded by the values' range, not their number


@pytest.mark.unit
def test_weighted_sum_is_the_sum_of_the_products():
    # products and partial sums of small integers are exact in floats: the truth is the integers' sum; 30,000
    # values, where a BLAS dot would have split the work across its threads
    rng = random.Random(5)
    values = [rng.randrange(0, 5000) for _ in range(30_000)]
    weights = [rng.randrange(1, 9) for _ in range(30_000)]
    truth = sum(v * w for v, w in zip(values, weights))
    assert weighted_sum(values, weights) == truth
    assert weighted_sum(np.array(values, dtype=np.int64), np.array(weights, dtype=float)) == truth
    assert weighted_distribution(values, weights)["mean"] == truth / sum(weights)
    sketch = RelativeSketch()
    sketch.add(values, weights)
    assert sketch.weighted_sum == truth
    assert weighted_sum([], []) == 0.0


@pytest.mark.unit
def test_a_distribution_turning_to_its_sketch_leaves_no_thread_busy():
    # the switch sums 65,537+ products at once: as a BLAS dot, OpenBLAS ran it on its thread pool, whose threads
    # then spun while the process slept (here ~0.1 s; on the 16-core host a whole extra core through the cell)
    script = ("import time, numpy as np\nfrom loadgen.metrics.sketch import EXACT_MAX, BoundedDistribution\n"
              "d = BoundedDistribution(weighted=True)\n"
              "d.add(np.random.default_rng(1).random(EXACT_MAX + 5000), np.ones(EXACT_MAX + 5000))\n"
              "d.summary()\nt0 = time.process_time()\ntime.sleep(0.3)\nprint(time.process_time() - t0)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    assert float(out.stdout) < 0.03, f"{float(out.stdout):.3f} s of CPU while the process slept 0.3 s"


@pytest.mark.unit
def test_bounded_distribution_is_exact_until_its_limit_then_within_alpha():
    rng = np.random.default_rng(3)
    values = rng.lognormal(-4, 1, 5_000)
    small = BoundedDistribution(weighted=False, exact_max=10_000)
    big = BoundedDistribution(weighted=False, exact_max=1_000)
    for part in np.array_split(values, 50):
        small.add(part)
        big.add(part)
    assert small.exact and small.summary() == distribution(values)
    assert not big.exact
    got, want = big.summary(), distribution(values)
    assert got["samples"] == want["samples"] and got["mean"] == pytest.approx(want["mean"], rel=1e-12)
    # a sketched percentile is within alpha of an order statistic at its rank (inverted CDF)
    for q in (50, 90, 99):
        rank = weighted_percentiles(values, np.ones(len(values)), [q])[0]
        assert abs(got[f"p{q}"] - rank) <= ALPHA * rank


def _record(rng: random.Random, seq: int, t0: int, counts: bool = True) -> Record:
    chunks = rng.randint(1, 40)
    gaps = [rng.choice([0, rng.randint(10_000, 900_000), rng.randint(1_000_000, 40_000_000)])
            for _ in range(chunks - 1)]
    tokens = [rng.choice([0, 1, 1, 3, 4]) for _ in range(chunks)] if counts else None
    if tokens is not None:
        tokens[0] = max(tokens[0], 1)
    sent = t0 + rng.randint(0, 5_000_000)
    first = sent + rng.randint(1_000_000, 9_000_000)
    last = first + sum(gaps)
    return Record(run_id="r", cell=CellKey(60, 8), seq=seq, request_id=request_id_for("r", CellKey(60, 8), seq),
                  t_intended_ns=sent, t_sent_ns=sent,
                  t_first_byte_ns=first, t_first_token_ns=first, t_last_token_ns=last, t_end_ns=last + 1000,
                  prompt_tokens=60, completion_tokens=sum(tokens) if tokens else chunks, chunks=chunks,
                  chunk_tokens=tokens, chunk_gaps_ns=gaps, spec={"spec_verify_ct": max(1, chunks - 1)})


def _closed_loop(n: int, slots: int = 8) -> list[Record]:
    """Records of `slots` slots each sending its next request when its previous one ended."""
    rng = random.Random(11)
    free = [1_000_000] * slots
    recs = []
    for seq in range(n):
        s = min(range(slots), key=free.__getitem__)
        r = _record(rng, seq, free[s], counts=seq % 7 != 0)
        if seq % 13 == 5:
            r.outcome, r.error = Outcome.HTTP_ERROR, "HTTP 500: boom"
        free[s] = r.t_end_ns
        recs.append(r)
    recs.sort(key=lambda r: r.t_end_ns)  # records reach the cell as requests end
    return recs


@pytest.mark.unit
def test_fold_in_batches_equals_the_per_record_formulas():
    recs = [r for r in _closed_loop(300) if r.ok]
    fold = ChunkFold()
    for i in range(0, len(recs), 17):
        fold.add(recs[i:i + 17])
    values, weights = [], []
    for r in recs:
        v, w = itl_pairs(r)
        values += v
        weights += w
    assert fold.itl_figures() == weighted_distribution(values, weights)
    groups = [step_groups(r) for r in recs]
    gaps = [g / 1e9 for _, step_gaps in groups for g in step_gaps]
    steps = fold.step_figures()
    assert steps["step_itl_s"] == distribution(gaps, (50, 99))
    assert steps["steps_per_request_mean"] == pytest.approx(np.mean([len(e) for e, _ in groups]), rel=1e-15)
    assert steps["events_per_step_mean"] == sum(sum(e) for e, _ in groups) / sum(len(e) for e, _ in groups)


@pytest.mark.unit
def test_summary_of_kept_records_equals_the_summary_of_whole_records():
    whole = _closed_loop(600)
    kept = CellRecords()
    for r in copy.deepcopy(whole):
        kept.keep(r)
    try:
        records = kept.records()
        assert sum(chunks_elsewhere(r) for r in records) > 500  # the ok ones moved out
        got = summarize(records, kept.fold, kept.spill.arrivals)
    finally:
        kept.close()
    want = summarize(whole)
    assert got["steady"] is not None and got["steady"]["output_tok_s"] > 0
    assert got == want


@pytest.mark.unit
def test_columns_give_back_the_records_they_were_given():
    recs = _closed_loop(200)
    recs[3].spec = {"spec_verify_ct": 7, "spec_accept_length": 2.5, "nested": {"a": 1}}
    recs[4].spec = None
    recs[10].spec = {}
    recs[5].spec = {"draft_n": 12, "draft_n_accepted": 9}
    recs[6].request_id, recs[7].category, recs[8].worker = "mine", "code", 3
    recs[9].t_first_token_ns = recs[9].t_last_token_ns = None
    columns = RecordColumns()
    for r in copy.deepcopy(recs):
        columns.append(r)
    back = columns.records()
    assert back == recs
    assert [type(v) for v in back[5].spec.values()] == [int, int]


@pytest.mark.unit
def test_open_files_say_how_many_streams_a_process_holds_and_which_workers_hold_them():
    check_open_files(10_000, 1, 65_536, 65_536)
    check_open_files(10_000, 3, 4_096, 4_096)  # 3,334 each
    with pytest.raises(UsageError) as exc:
        check_open_files(10_000, 1, 1_024, 4_096)
    assert str(exc.value) == (
        "--concurrency 10000: ulimit -n 1024 (hard 4096) allows 960 streams a process; use --workers 11 or raise it")
    with pytest.raises(UsageError) as exc:
        check_open_files(10_000, 3, 1_024, 1_024)
    assert str(exc.value) == "--concurrency 10000 over 3 workers: ulimit -n 1024 allows 960 streams a process; use " \
        "--workers 11 or raise it"
    assert workers_needed(10_000, 1_024) * streams_per_process(1_024) >= 10_000


@pytest.mark.sim
def test_a_run_over_the_open_file_limit_says_so_before_any_load():
    """A real process under a hard limit of 512 open files: exit 2, one line, before it connects anywhere
    (the URL's port is closed: any attempt to connect would fail differently)."""
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "loadgen", "--url", f"http://127.0.0.1:{port}", "--concurrency",
                           "1000"], capture_output=True, text=True, timeout=60, cwd=ROOT, preexec_fn=low_limit)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "loadgen: error: --concurrency 1000: ulimit -n 512 allows 448 streams a process; use --workers 3 or raise it"]


@pytest.mark.unit
def test_a_cell_that_reads_each_requests_chunks_later_keeps_them():
    whole = _closed_loop(100)
    kept = CellRecords(keep_chunks=True)
    for r in copy.deepcopy(whole):
        kept.keep(r)
    try:
        records = kept.records()
        assert not any(chunks_elsewhere(r) for r in records)
        assert [itl_pairs(r) for r in records] == [itl_pairs(r) for r in whole]
        assert summarize(records, kept.fold, kept.spill.arrivals) == summarize(whole)
    finally:
        kept.close()
