"""The per-request figures of `loadgen.metrics.request` over a whole cell at once, from int64 columns.

A cell of 100,000 requests asked each record for each figure: ~30 passes of Python calls over the records. Here
the fields those figures read are taken once into numpy columns (`RequestColumns.of`) and each figure calls its
formula in `request.py` on the columns of the rows that have it, in the same float64 operations (an int
difference, then a true division), so every value is bit-for-bit the one the one-record function gives; a
figure's values come back as a float64 array in record order, the records without the figure (None there) left
out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from loadgen.metrics.record_table import RecordTable, or_zero
from loadgen.metrics.request import decode_rate, latency_s, lateness_s, per_token_s, prefill_rate
from loadgen.record import Record

FIELDS = ("t_intended_ns", "t_sent_ns", "t_first_token_ns", "t_last_token_ns", "t_end_ns", "prompt_tokens",
          "completion_tokens", "cached_tokens", "chunks")
NONE = -(1 << 63)  # a field that is None


@dataclass(frozen=True)
class RequestColumns:
    """One int64 array per field of `FIELDS` (`NONE` where the record's field is None), in record order."""

    t_intended_ns: np.ndarray
    t_sent_ns: np.ndarray
    t_first_token_ns: np.ndarray
    t_last_token_ns: np.ndarray
    t_end_ns: np.ndarray
    prompt_tokens: np.ndarray
    completion_tokens: np.ndarray
    cached_tokens: np.ndarray
    chunks: np.ndarray

    @classmethod
    def of(cls, recs: Sequence[Record] | RecordTable) -> RequestColumns:
        """The columns of `recs` (a table's own columns; of records: one pass over them a field)."""
        if isinstance(recs, RecordTable):
            return cls(*recs.ints_of(FIELDS))
        return cls(*(_column(recs, name) for name in FIELDS))

    def __len__(self) -> int:
        return len(self.t_end_ns)

    def where(self, keep: np.ndarray) -> RequestColumns:
        """The rows where `keep` (a bool array) holds."""
        return RequestColumns(*(getattr(self, name)[keep] for name in FIELDS))

    def ttft_s(self) -> np.ndarray:
        """`request.ttft_s` of the rows with a first token."""
        has = self.t_first_token_ns != NONE
        return latency_s(self.t_first_token_ns[has], self.t_sent_ns[has])

    def ttft_from_intended_s(self) -> np.ndarray:
        """`request.ttft_from_intended_s` of the rows with a first token."""
        has = self.t_first_token_ns != NONE
        return latency_s(self.t_first_token_ns[has], self.t_intended_ns[has])

    def e2e_s(self) -> np.ndarray:
        """`request.e2e_s` of every row."""
        return latency_s(self.t_end_ns, self.t_sent_ns)

    def e2e_from_intended_s(self) -> np.ndarray:
        """`request.e2e_from_intended_s` of every row."""
        return latency_s(self.t_end_ns, self.t_intended_ns)

    def send_lateness_s(self) -> np.ndarray:
        """`request.send_lateness_s`, max(0, t_sent − t_intended) / 1e9, of the rows sent (both times set, not 0)."""
        sent = ~np.isin(self.t_sent_ns, (0, NONE)) & ~np.isin(self.t_intended_ns, (0, NONE))
        return lateness_s(self.t_sent_ns[sent], self.t_intended_ns[sent])

    def has_decode_rate(self) -> np.ndarray:
        """Where a row has `request.request_tok_s`: at least 2 tokens, a first token, and a time from the first
        to the last token (else t_end) > 0."""
        tokens, first = self.completion_tokens, self.t_first_token_ns
        has = (tokens != NONE) & (tokens >= 2) & (first != NONE)
        has[has] = self._decode_s(has) > 0
        return has

    def _decode_s(self, rows: np.ndarray) -> np.ndarray:
        """The time from the first to the last token (t_end where the last token's time is missing) of `rows`."""
        last = np.where(np.isin(self.t_last_token_ns, (0, NONE)), self.t_end_ns, self.t_last_token_ns)
        return latency_s(last[rows], self.t_first_token_ns[rows])

    def request_tok_s(self) -> np.ndarray:
        """`request.request_tok_s` of the rows that have one."""
        has = self.has_decode_rate()
        return decode_rate(self.completion_tokens[has], self._decode_s(has))

    def tpot_s(self) -> np.ndarray:
        """`request.tpot_s` of the rows that have one."""
        return per_token_s(self.request_tok_s())

    def prefill_tok_s(self) -> np.ndarray:
        """`request.prefill_tok_s`, (prompt_tokens − cached_tokens) / TTFT, where both are > 0."""
        has = self.t_first_token_ns != NONE
        t = latency_s(self.t_first_token_ns[has], self.t_sent_ns[has])
        computed = or_zero(self.prompt_tokens[has]) - or_zero(self.cached_tokens[has])
        keep = (computed > 0) & (t > 0)
        return prefill_rate(computed[keep], t[keep])

    def total(self, name: str) -> int:
        """Σ of a count column, None counted as 0."""
        return int(or_zero(getattr(self, name)).sum())

    def present(self, name: str) -> list[int]:
        """The values of a column where they are not None, in record order."""
        column = getattr(self, name)
        return column[column != NONE].tolist()


def _column(recs: Sequence[Record], name: str) -> np.ndarray:
    """Field `name` of every record as int64, `NONE` for None (the common case, no None, in one fromiter)."""
    try:
        return np.fromiter(map(attrgetter(name), recs), dtype=np.int64, count=len(recs))
    except TypeError:  # a None among them
        values = (NONE if v is None else v for v in map(attrgetter(name), recs))
        return np.fromiter(values, dtype=np.int64, count=len(recs))

