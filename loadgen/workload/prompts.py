"""The prompts of a cell: natural text of exactly the cell's prompt length, with a unique prefix each.

With the server's tokenizer (`workload.tokenizers`) every prompt is fitted to the exact token count, minus the
chat template's own tokens (measured once by a probe; 0 where the server counts a whole chat request).
Without it, lengths are estimated from the probe's characters per token. A spread (`workload.lengths`) draws
each request's prompt and output length, seeded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from loadgen.client.api import RequestOptions, build_body
from loadgen.config import LengthSpread
from loadgen.names import Api
from loadgen.record import CellKey, load_tag
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
    counter: TokenCounter | None  # the server's tokenizer (workload.tokenizers.find_tokenizer), None without one
    overhead_tokens: int = 0  # the chat template's tokens, measured by the probe
    chars_per_token: float = 4.0  # without a tokenizer: measured by the probe
    api: Api = Api.OPENAI_CHAT
    sizing: dict = field(default_factory=dict)  # exact or estimated, counted by what (workload.tokenizers)
    context_spreads: dict = field(default_factory=dict)  # prompt length → LengthSpread (workload.lengths)
    output_spread: LengthSpread | None = None
    shared_prefix: tuple[int, int] | None = None  # (groups, tokens): --shared-prefix GROUPS:TOKENS

    @property
    def method(self) -> str:
        return "tokenize" if self.counter else "probe-ratio"

    def describe(self) -> dict:
        """How prompts were made, for the results file."""
        shared = {"shared_prefix": {"groups": self.shared_prefix[0], "tokens": self.shared_prefix[1]}} \
            if self.shared_prefix else {}
        return {"method": self.method, "template_overhead_tokens": self.overhead_tokens, "source": "synthetic",
                "prefix_cache": "shared" if shared else "unique", **self.sizing, **self._spreads(), **shared}

    def _spreads(self) -> dict:
        out: dict[str, Any] = {}
        if self.context_spreads:
            out["context_spreads"] = {str(c): s.describe() for c, s in self.context_spreads.items()}
        if self.output_spread is not None:
            out["output_spread"] = self.output_spread.describe()
        return out

    def _rng(self, what: str, cell: CellKey):
        return seeded_rng(self.seed, what, cell.context_tokens, cell.concurrency, cell.request_rate)

    def prompt_lengths(self, cell: CellKey, n: int) -> list[int]:
        """Each request's prompt length: the cell's, or drawn from its spread (seeded by the cell)."""
        spread = self.context_spreads.get(cell.context_tokens)
        if spread is None:
            return [cell.context_tokens] * n
        return spread.draw(self._rng("lengths", cell), cell.context_tokens, n)

    async def bodies(self, cell: CellKey, n: int, opts: RequestOptions) -> tuple[list[dict], None]:
        """The request bodies of `n` prompts of the cell (no categories); with an output spread each gets
        its own max tokens (and ignore_eos, so it produces exactly that many)."""
        texts = await self.build(cell, n)
        if self.output_spread is None:
            return [build_body(self.api, t, opts) for t in texts], None
        outputs = self.output_spread.draw(self._rng("outputs", cell), opts.max_tokens, n)
        return [build_body(self.api, t, dataclasses.replace(opts, max_tokens=m)) for t, m in zip(texts, outputs)], None

    async def group_heads(self, cell: CellKey, load) -> list[str]:
        """Each group's shared opening of exactly `tokens` tokens (seeded; unique to the run and the cell, so
        every cell starts cold), or [""] without --shared-prefix. Request i is in group i mod groups; its
        unique part follows on a new line (`_after`)."""
        if not self.shared_prefix:
            return [""]
        groups, tokens = self.shared_prefix
        tags = [f"[{self.run_id} c{load} n{cell.context_tokens} shared {g}]\n" for g in range(groups)]
        rngs = [self._rng(f"shared{g}", cell) for g in range(groups)]
        if self.counter is None:
            chars = int(tokens * self.chars_per_token)
            return [t + self.corpus.window(r, chars)[: max(0, chars - len(t))] for t, r in zip(tags, rngs)]
        texts, _ = await fit_prompts(tags, [self.corpus.window(r, chars_for(tokens)) for r in rngs],
                                     [tokens] * groups, self.counter)
        return texts

    async def build(self, cell: CellKey, n: int) -> list[str]:
        rng = seeded_rng(self.seed, cell.context_tokens, cell.concurrency, cell.request_rate)
        targets = [max(1, t - self.overhead_tokens) for t in self.prompt_lengths(cell, n)]
        load = load_tag(cell)
        heads = await self.group_heads(cell, load)
        prefixes = [_after(heads[i % len(heads)]) + unique_prefix(self.run_id, cell.context_tokens, load, i)
                    for i in range(n)]
        if self.counter is None:
            chars = [int(t * self.chars_per_token) for t in targets]
            return [p + self.corpus.window(rng, c)[: max(0, c - len(p))] for p, c in zip(prefixes, chars)]
        bodies = [self.corpus.window(rng, chars_for(t)) for t in targets]
        texts, _ = await fit_prompts(prefixes, bodies, targets, self.counter)
        return texts


def _after(head: str) -> str:
    """A group's shared opening and the line break that starts the request's own part (none without one)."""
    return head + "\n" if head else ""
