"""The prompts of a cell: natural text of exactly the cell's prompt length, with a unique prefix each.

With the server's tokenizer (`/v1/tokenize`) every prompt is fitted to the exact token count, minus the chat
template's own tokens (measured once by a probe). Without it, lengths are estimated from the probe's
characters per token.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.record import CellKey
from loadgen.target.discover import TokenCounter
from loadgen.workload.corpus import Corpus, seeded_rng
from loadgen.workload.prefix import unique_prefix
from loadgen.workload.sizing import chars_for, fit_prompts


@dataclass
class PromptBuilder:
    run_id: str
    seed: int
    model: str
    corpus: Corpus
    counter: TokenCounter | None  # the server's tokenizer, when it has /v1/tokenize
    overhead_tokens: int = 0  # the chat template's tokens, measured by the probe
    chars_per_token: float = 4.0  # without a tokenizer: measured by the probe

    @property
    def method(self) -> str:
        return "tokenize" if self.counter else "probe-ratio"

    async def build(self, cell: CellKey, n: int) -> list[str]:
        rng = seeded_rng(self.seed, cell.context_tokens, cell.concurrency, cell.request_rate)
        body_tokens = cell.context_tokens - self.overhead_tokens
        load = cell.concurrency if cell.request_rate is None else f"{cell.concurrency}r{cell.request_rate:g}"
        prefixes = [unique_prefix(self.run_id, cell.context_tokens, load, i) for i in range(n)]
        if self.counter is None:
            chars = int(body_tokens * self.chars_per_token)
            return [p + self.corpus.window(rng, chars)[: max(0, chars - len(p))] for p in prefixes]
        bodies = [self.corpus.window(rng, chars_for(body_tokens)) for _ in range(n)]
        texts, _ = await fit_prompts(prefixes, bodies, [body_tokens] * n, self.counter)
        return texts
