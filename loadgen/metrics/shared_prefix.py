"""The prefix cache's share of a cell whose prompts open with a shared prefix (`--shared-prefix G:T`).

Request `seq` is in group seq mod G; every request of a group opens with the same T tokens. The first request
of each group (seq < G) must compute them; every later one could be served them from a prefix cache. Over the
cell's ok measured requests:

- cacheable_tokens = T × #{ok requests with seq ≥ G}
- cacheable_fraction = cacheable_tokens / Σ prompt_tokens
- cached_tokens = Σ cached_tokens (the server's report; None when none reported)
- cached_of_cacheable = cached_tokens / cacheable_tokens: 1 when the cache served every shared prefix it
  could; lower when requests of a group were prefilled together, before the first had filled the cache, or
  entries were evicted. The chat template's opening, the same for every request, may add a few tokens more.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics.record_table import RecordTable, or_zero
from loadgen.metrics.server_counts import cached_tokens
from loadgen.record import Record


def shared_prefix_figures(ok: Sequence[Record] | RecordTable, groups: int, tokens: int) -> dict:
    """{groups, tokens, cacheable_tokens, cacheable_fraction, cached_tokens, cached_of_cacheable} of the ok
    requests (module docstring)."""
    t = RecordTable.of(ok)
    cacheable = tokens * int((t.ints("seq") >= groups).sum())
    prompt = int(or_zero(t.ints("prompt_tokens")).sum())
    cached = cached_tokens(t)
    return {"groups": groups, "tokens": tokens, "cacheable_tokens": cacheable,
            "cacheable_fraction": cacheable / prompt if prompt else None, "cached_tokens": cached,
            "cached_of_cacheable": cached / cacheable if cached is not None and cacheable else None}
