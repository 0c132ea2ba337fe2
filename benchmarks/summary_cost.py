"""The pause between a cell's last response and its result, and the memory that summary adds, at N requests.

    python benchmarks/summary_cost.py RUN.requests.jsonl [--requests 100000] [--profile]

The measured records of a real run (its JSONL) are repeated, each copy with new sequence numbers and its times
moved on by the run's window, until there are N; they go through the cell's bounded keeper
(`run/chunk_spill.CellRecords.keep`, as the runner keeps them while the load runs), then the summary runs exactly
as `run/cell.py` runs it after the load: `results.build_cell` over `measured.table()` with the fold and the
spill. Reported: its wall and CPU time, and the Python heap it adds at its peak (tracemalloc, in a second pass:
tracing slows the code it measures) beside the RSS before and after.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import pstats
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.names import Phase  # noqa: E402
from loadgen.record import Record, request_id_for  # noqa: E402
from loadgen.results.build_cell import build_cell  # noqa: E402
from loadgen.run.chunk_spill import CellRecords  # noqa: E402


def measured(path: str) -> list[Record]:
    with open(path, "rb") as fh:
        recs = [Record.from_dict(orjson.loads(line)) for line in fh]
    return [r for r in recs if r.phase == Phase.MEASURE]


def kept(base: list[Record], n: int) -> CellRecords:
    """N records in a keeper: `base` repeated, seq and times moved on per copy (as a longer cell's)."""
    span = max(r.t_end_ns for r in base) - min(r.t_sent_ns for r in base)
    seq0 = max(r.seq for r in base) + 1
    keeper = CellRecords()
    time_fields = [f.name for f in dataclasses.fields(Record) if f.name.startswith("t_")]
    for i in range(n):
        copy, r = divmod(i, len(base))
        src = base[r]
        shift = copy * span
        rec = dataclasses.replace(src, seq=src.seq + copy * seq0, request_id="",
                                  chunk_tokens=None if src.chunk_tokens is None else list(src.chunk_tokens),
                                  chunk_gaps_ns=list(src.chunk_gaps_ns),
                                  **{t: getattr(src, t) + shift for t in time_fields if getattr(src, t) is not None})
        rec.request_id = request_id_for(rec.run_id, rec.cell, rec.seq, rec.attempt)
        keeper.keep(rec)
    return keeper


def summary(keeper: CellRecords):
    table = keeper.table()  # what `run/cell.py` summarises: the kept columns, no record rebuilt
    cell = table.cell()
    assert cell is not None
    return build_cell(cell, table, (), None, chunks=keeper.fold, arrivals=keeper.spill.arrivals)


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("jsonl")
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--profile", action="store_true", help="print the summary's 25 costliest calls")
    a = p.parse_args()
    base = measured(a.jsonl)
    keeper = kept(base, a.requests)
    keeper.finish()
    gc.collect()
    rss0 = rss_mib()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = summary(keeper)
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    rss1 = rss_mib()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{a.requests} requests ({len(base)} real ones repeated), {result.requests.requests['ok']} ok: summary "
          f"{wall_s:.3f} s wall, {cpu_s:.3f} s CPU; RSS {rss0:.1f} -> {rss1:.1f} MiB (peak of the process "
          f"{peak_mib:.1f} MiB)")
    del result
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _held = summary(keeper)  # alive while the peak is read
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"summary transient (tracemalloc peak over its start): {(peak - before) / 2**20:.1f} MiB")
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        summary(keeper)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    keeper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
