"""A cell's kept records in bounded memory: per-chunk lists folded as each request ends, then moved to disk.

Every record reaches every sink whole first (the JSONL keeps every chunk). What the cell then keeps of an ok
record until its summary is its per-request fields; its chunks are folded into the cell's per-chunk figures
(`metrics.chunk_fold.ChunkFold`) and written to a temporary spill file, from which the summary reads back only
the few records that cross an edge of the steady window (`metrics.steady.tokens_in_window`). A record whose
per-chunk counts disagree with its total, and a failed one, keeps its lists (compact), as before.
"""

from __future__ import annotations

import dataclasses
import tempfile
from array import array

from loadgen.metrics.chunk_fold import ChunkFold
from loadgen.metrics.steady import token_arrivals
from loadgen.record import ChunksElsewhere, Record, chunks_elsewhere


def movable(r: Record) -> bool:
    """Whether the summary can do without the record's lists: one gap per chunk after the first, and
    per-chunk counts (when any) that add up to its completion tokens (`steady.tokens_in_window`)."""
    return r.chunks == len(r.chunk_gaps_ns) + 1 and (r.chunk_tokens is None
                                                      or sum(r.chunk_tokens) == r.completion_tokens)


class ChunkSpill:
    """Per-chunk lists in a temporary file (deleted when closed), each at its `ChunksElsewhere` offset."""

    def __init__(self):
        self._file = tempfile.TemporaryFile(prefix="loadgen-chunks-")
        self._end = 0

    def move(self, r: Record) -> None:
        gaps = array("q", r.chunk_gaps_ns)
        tokens = None if r.chunk_tokens is None else array("i", r.chunk_tokens)
        data = gaps.tobytes() + (tokens.tobytes() if tokens is not None else b"")
        self._file.write(data)
        ref = ChunksElsewhere(self._end, len(gaps), tokens is not None)
        self._end += len(data)
        r.chunk_gaps_ns = ref
        r.chunk_tokens = ref if tokens is not None else None

    def lists(self, ref: ChunksElsewhere) -> tuple[array, array | None]:
        self._file.flush()
        self._file.seek(ref.offset)
        gaps = array("q")
        gaps.frombytes(self._file.read(8 * ref.gaps))
        tokens = None
        if ref.tokens:
            tokens = array("i")
            tokens.frombytes(self._file.read(4 * (ref.gaps + 1)))
        self._file.seek(0, 2)
        return gaps, tokens

    def arrivals(self, r: Record) -> list[tuple[int, float]]:
        """`steady.token_arrivals` of the record, its lists read back when they were moved here."""
        if not chunks_elsewhere(r):
            return token_arrivals(r)
        gaps, tokens = self.lists(r.chunk_gaps_ns)
        return token_arrivals(dataclasses.replace(r, chunk_gaps_ns=gaps, chunk_tokens=tokens))

    def close(self) -> None:
        self._file.close()


class CellRecords:
    """The measured records one cell keeps for its summary, with the fold of their chunks and the spill.
    Ok records wait in a batch of `BATCH` before they are folded (`ChunkFold.add`) and moved to the spill;
    `finish()` folds the last batch."""

    BATCH = 64

    def __init__(self):
        self.records: list[Record] = []
        self.fold = ChunkFold()
        self.spill = ChunkSpill()
        self._batch: list[Record] = []

    def keep(self, rec: Record) -> None:
        self.records.append(rec)
        if not rec.ok:
            rec.compact()
            return
        self._batch.append(rec)
        if len(self._batch) >= self.BATCH:
            self.finish()

    def finish(self) -> None:
        """Fold the waiting batch and move its records' chunks to the spill (all folded after this)."""
        batch, self._batch = self._batch, []
        self.fold.add(batch)
        for rec in batch:
            if movable(rec):
                self.spill.move(rec)
            else:
                rec.compact()

    def close(self) -> None:
        self.spill.close()
