"""A cell's kept records in bounded memory: per-chunk lists folded as each request ends, then moved to disk.

Every record reaches every sink whole first (the JSONL keeps every chunk). What the cell then keeps of an ok
record until its summary is its per-request fields, as columns (`record_columns.RecordColumns`, their integer
rows on disk too); its chunks are folded into the cell's per-chunk figures (`metrics.chunk_fold.ChunkFold`)
and written to a temporary spill file, from which the summary reads back only the few records that cross an
edge of the steady window (`metrics.steady.tokens_in_window`). A record whose per-chunk counts disagree with
its total, and a failed one, keeps its lists (compact), as before.
"""

from __future__ import annotations

import tempfile
from array import array

from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.record_table import RecordTable
from loadgen.metrics.steady import chunk_arrivals, token_arrivals
from loadgen.record import CHUNKS_ELSEWHERE, Record, chunks_elsewhere
from loadgen.run.record_columns import RecordColumns


def movable(r: Record) -> bool:
    """Whether the summary can do without the record's lists: one gap per chunk after the first, and
    per-chunk counts (when any) that add up to its completion tokens (`steady.tokens_in_window`)."""
    return r.chunks == len(r.chunk_gaps_ns) + 1 and (r.chunk_tokens is None
                                                      or sum(r.chunk_tokens) == r.completion_tokens)


class ChunkSpill:
    """Per-chunk lists in a temporary file (deleted when closed), found by the record's `seq`: where its gaps
    start and how many there are (negative: no per-chunk counts), 16 bytes a record in memory."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="loadgen-chunks-")
        self._end = 0
        self._first_seq: int | None = None
        self._offsets = array("q")
        self._gaps = array("q")

    def move(self, recs: list[Record]) -> None:
        """Write the records' lists (gaps, then counts, as int64) in one write and put `CHUNKS_ELSEWHERE` in
        their place."""
        buf = array("q")
        for r in recs:
            gaps, tokens = r.chunk_gaps_ns, r.chunk_tokens
            self._index(r.seq, self._end + 8 * len(buf), len(gaps) if tokens is not None else -1 - len(gaps))
            buf.extend(gaps)
            if tokens is not None:
                buf.extend(tokens)
                r.chunk_tokens = CHUNKS_ELSEWHERE
            r.chunk_gaps_ns = CHUNKS_ELSEWHERE
        self._file.write(buf.tobytes())
        self._end += 8 * len(buf)

    def _index(self, seq: int, offset: int, gaps: int) -> None:
        """Record `seq`'s lists start at `offset`; `gaps` of them, or −1 − that many without per-chunk counts."""
        if self._first_seq is None:
            self._first_seq = seq
        if seq - self._first_seq == len(self._offsets):  # the common case: the next one
            self._offsets.append(offset)
            self._gaps.append(gaps)
            return
        if seq < self._first_seq:  # requests end out of order: room in front
            before = self._first_seq - seq
            self._offsets = array("q", [-1] * before) + self._offsets
            self._gaps = array("q", [0] * before) + self._gaps
            self._first_seq = seq
        i = seq - self._first_seq
        if i >= len(self._offsets):
            self._offsets.extend([-1] * (i + 1 - len(self._offsets)))
            self._gaps.extend([0] * (i + 1 - len(self._gaps)))
        self._offsets[i], self._gaps[i] = offset, gaps

    def lists(self, seq: int) -> tuple[array, array | None]:
        """The gaps and counts (None: none) of the record `seq`."""
        i = seq - (self._first_seq or 0)
        offset, n = self._offsets[i], self._gaps[i]
        has_tokens = n >= 0
        n = n if has_tokens else -1 - n
        self._file.flush()
        self._file.seek(offset)
        gaps = array("q")
        gaps.frombytes(self._file.read(8 * n))
        tokens = None
        if has_tokens:
            tokens = array("q")
            tokens.frombytes(self._file.read(8 * (n + 1)))
        self._file.seek(0, 2)
        return gaps, tokens

    def arrivals(self, r: Record) -> list[tuple[int, float]]:
        """`steady.token_arrivals` of the record, its lists read back when they were moved here."""
        if not chunks_elsewhere(r):
            return token_arrivals(r)
        gaps, tokens = self.lists(r.seq)
        return chunk_arrivals(r.t_first_token_ns, r.completion_tokens, r.chunks, gaps, tokens)

    def close(self) -> None:
        self._file.close()


class CellRecords:
    """The measured records one cell keeps for its summary: as columns (`RecordColumns`), their chunks
    folded (`ChunkFold`) and moved to the spill. Records wait in a batch of `BATCH` (or `BATCH_CHUNKS` chunks)
    before the ok ones are folded (failed ones keep their lists, compact); `finish()` folds the last batch,
    `records()` gives them back as `Record` objects."""

    BATCH = 64
    BATCH_CHUNKS = 4096  # or fewer records, when they are long: the batch's arrays stay small

    def __init__(self, keep_chunks: bool = False):
        self.keep_chunks = keep_chunks  # a figure reads each request's chunks after the load: they stay in it
        self.columns = RecordColumns()
        self.fold = ChunkFold()
        self.spill = ChunkSpill()
        self._batch: list[Record] = []
        self._batch_chunks = 0
        self._records: list[Record] | None = None

    def __len__(self) -> int:
        return len(self.columns) + len(self._batch)

    def keep(self, rec: Record) -> None:
        self._batch.append(rec.compact())  # converted once; the fold and the spill copy the arrays
        self._batch_chunks += rec.chunks
        if len(self._batch) >= self.BATCH or self._batch_chunks >= self.BATCH_CHUNKS:
            self.finish()

    def finish(self) -> None:
        """Fold the waiting batch's ok records, move their chunks to the spill and every record of the batch
        to the columns (in the order they ended)."""
        batch, self._batch, self._batch_chunks = self._batch, [], 0
        ok = [rec for rec in batch if rec.ok]
        self.fold.add(ok)
        if not self.keep_chunks:
            self.spill.move([rec for rec in ok if movable(rec)])
        for rec in batch:
            self.columns.append(rec)

    def records(self) -> list[Record]:
        """Every kept record (the waiting batch folded first); built once while no record is added (an open-loop
        cell reads its send lateness before its summary: one rebuild serves both)."""
        self.finish()
        if self._records is None or len(self._records) != len(self.columns):
            self._records = self.columns.records()
        return self._records

    def table(self) -> RecordTable:
        """Every kept record (the waiting batch folded first) as a `RecordTable` read from the columns: what the
        summary reads, no `Record` built but those a figure reads whole."""
        self.finish()
        return self.columns.table()

    def close(self) -> None:
        self._records = None
        self.spill.close()
        self.columns.close()
