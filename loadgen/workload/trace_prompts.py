"""The prompts of a trace replay (`--trace FILE`): each row's prompt of exactly its `input_length` tokens (the
server's tokenizer), its first blocks shared with every row that names the same hash ids.

A row's prompt is its shared blocks, then its own tail:

    block(h_0) block(h_1) … block(h_{k-1})   <unique tag> natural text, cut so the whole counts input_length

Block h is the same text wherever it appears: a tag naming the run and h, then natural text cut to exactly
`BLOCK_TOKENS` tokens (seeded by --seed and h), so rows sharing hash ids share that prefix, byte for byte, and
nothing is shared with another run. k = the row's hash ids whose blocks fit wholly before a tail of at least
TAIL_MIN_TOKENS: min(len(hash_ids), ⌊(input_length − template − TAIL_MIN_TOKENS) / BLOCK_TOKENS⌋); the tail (the
partial last block) is the row's own, opened by the row's tag.
The tail is fitted on the whole prompt (`sizing.fit_prompts` with the blocks as its prefix), so the prompt's
count is exact whatever the tokenizer does at a block's edge; the chat template's tokens (measured by the
setup's probe) are subtracted, as for the synthetic matrix.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field

from loadgen.client.api import RequestOptions, build_body
from loadgen.names import Api
from loadgen.record import CellKey
from loadgen.target.discover import TokenCounter
from loadgen.workload.corpus import Corpus, seeded_rng
from loadgen.workload.prefix import seq_tag
from loadgen.workload.sizing import chars_for, fit_prompts
from loadgen.workload.textfile import BadRow, WorkloadError, check_bad_rows
from loadgen.workload.trace import BLOCK_TOKENS, Trace, TraceRow

TAIL_MIN_TOKENS = 16  # a row's own tail holds at least its tag and some text
SHORT_TOKENS = 8  # a prompt this short gets no tag (the tag alone would be longer)


def shared_blocks(row: TraceRow, overhead_tokens: int) -> tuple[int, ...]:
    """The hash ids whose whole block precedes the row's own tail of at least TAIL_MIN_TOKENS tokens."""
    room = max(0, row.input_length - overhead_tokens - TAIL_MIN_TOKENS) // BLOCK_TOKENS
    return row.hash_ids[:room]


def row_tag(run_id: str, i: int, tokens: int) -> str:
    """Row i's own tag (8 digits, unique in the run, `prefix.seq_tag`), none for a prompt of a few tokens."""
    return f"{seq_tag(i, zlib.crc32(run_id.encode()))}\n" if tokens >= SHORT_TOKENS else ""


@dataclass
class TracePrompts:
    """The request bodies of a trace's cells (the trace counterpart of `PromptBuilder`)."""

    run_id: str
    seed: int
    model: str
    api: Api
    trace: Trace
    corpus: Corpus
    counter: TokenCounter | None
    ignore_eos: bool = True
    overhead_tokens: int = 0
    chars_per_token: float = 4.0
    sizing: dict = field(default_factory=dict)
    blocks: dict[int, str] = field(default_factory=dict)  # hash id → its block's text
    texts: list[str] | None = None  # each row's prompt, made once (every cell replays the same rows)

    method = "trace"

    def describe(self) -> dict:
        t = self.trace
        return {"method": "tokenize" if self.counter else "probe-ratio", "source": "trace", "trace": t.path,
                "format": t.format, "rows": len(t.rows), "bad_rows": len(t.bad), "block_tokens": BLOCK_TOKENS,
                "shared_blocks": len(self.blocks), "template_overhead_tokens": self.overhead_tokens,
                "prefix_cache": "trace", **self.sizing}

    def check_context(self, max_model_len: int | None) -> None:
        """WorkloadError, naming every row whose input and output exceed the model's context. A trace is
        replayed whole (its timing is its load), so such a row is never skipped."""
        if not max_model_len:
            return
        t = self.trace
        over = [BadRow(r.line, f"over the model's context ({r.input_length + r.output_length} tokens of input and "
                               f"output > {max_model_len})") for r in t.rows
                if r.input_length + r.output_length > max_model_len]
        if over:
            check_bad_rows("--trace", t.path, over, len(t.rows), 10**9)
            raise WorkloadError(f"--trace {t.path}: {len(over)} rows over the model's context (named above); a "
                                "trace is replayed whole: shorten or remove them")

    def _windows(self, what: str, own: list[int]) -> list[str]:
        """Natural text for each prompt, seeded, long enough for `own` tokens."""
        rngs = [seeded_rng(self.seed, "trace", what, i) for i in range(len(own))]
        if self.counter is None:
            return [self.corpus.window(g, int(t * self.chars_per_token)) for g, t in zip(rngs, own)]
        return [self.corpus.window(g, chars_for(t)) for g, t in zip(rngs, own)]

    async def _fit(self, heads: list[str], targets: list[int], what: str) -> list[str]:
        """`head + natural text` counting `targets` tokens (estimated without a tokenizer).

        The tail is fitted after the head's last line alone, to target − count(head) + count(last line): the
        heads are counted once (fitting the whole prompt would count every shared block in every round), and
        the last line keeps how the tokenizer joins the tail's first characters with the head's. A prompt
        whose whole count still misses is fitted whole."""
        if self.counter is None:
            return [h + w for h, w in zip(heads, self._windows(what, [max(1, t - round(len(h) / self.chars_per_token))
                                                                       for h, t in zip(heads, targets)]))]
        lines = [h[h.rfind("\n", 0, len(h) - 1) + 1:] for h in heads]
        head_counts = await self.counter(heads)
        line_counts = await self.counter(lines)
        own = [max(1, t - c) for t, c in zip(targets, head_counts)]
        windows = self._windows(what, own)
        tails, _ = await fit_prompts(lines, windows, [o + c for o, c in zip(own, line_counts)], self.counter)
        texts = [h[: len(h) - len(line)] + tail for h, line, tail in zip(heads, lines, tails)]
        counts = await self.counter(texts)
        miss = [i for i, (c, t) in enumerate(zip(counts, targets)) if c != t]
        if miss:
            fitted, _ = await fit_prompts([heads[i] for i in miss], [windows[i] for i in miss],
                                          [targets[i] for i in miss], self.counter)
            for i, text in zip(miss, fitted):
                texts[i] = text
        return texts

    async def build(self) -> list[str]:
        """Every row's prompt text (blocks first, then the row's own tail), made once."""
        if self.texts is not None:
            return self.texts
        rows, over = self.trace.rows, self.overhead_tokens
        ids = sorted({h for r in rows for h in shared_blocks(r, over)})
        tags = [f"[{self.run_id} block {h}]\n" for h in ids]
        self.blocks = dict(zip(ids, await self._fit(tags, [BLOCK_TOKENS] * len(ids), "blocks")))
        targets = [max(1, r.input_length - over) for r in rows]
        heads = ["".join(self.blocks[h] for h in shared_blocks(r, over)) + row_tag(self.run_id, i, t)
                 for i, (r, t) in enumerate(zip(rows, targets))]
        self.texts = await self._fit(heads, targets, "rows")
        return self.texts

    async def bodies(self, cell: CellKey, n: int, opts: RequestOptions) -> tuple[list[dict], None]:
        """The first `n` rows' bodies in timestamp order, each with its row's output length (forced)."""
        texts = await self.build()
        rows = self.trace.rows[:n]
        return [build_body(self.api, text, dataclasses.replace(opts, max_tokens=r.output_length,
                                                                 ignore_eos=self.ignore_eos))
                for text, r in zip(texts, rows)], None
