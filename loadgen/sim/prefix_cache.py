"""The SGLang imitation's prefix cache (`loadgen sim --cache-report`): pages of `PAGE_TOKENS` prompt token ids,
each named by a hash of every id up to its end (so a page is found only after the same prefix), kept LRU.

A new prompt is served its longest run of leading pages already cached, at most its length − 1 tokens (the
last prompt token is always computed); then all its full pages are cached. The served count is the request's
`cached_tokens` (usage `prompt_tokens_details.cached_tokens`, meta_info `cached_tokens`, the truth), and the
engine prefills only the rest.
"""

from __future__ import annotations

from collections import OrderedDict

PAGE_TOKENS = 16
CAPACITY_PAGES = 1 << 18


class PageCache:
    def __init__(self, page_tokens: int = PAGE_TOKENS, capacity_pages: int = CAPACITY_PAGES):
        self.page = page_tokens
        self.capacity = capacity_pages
        self.pages: OrderedDict[int, None] = OrderedDict()
        self.hits = 0  # Σ tokens served, for sglang:cache_hit_rate
        self.seen = 0  # Σ prompt tokens admitted

    def admit(self, ids: list[int]) -> int:
        """Tokens of `ids` served from the cache; its full pages are cached afterwards."""
        keys, h = [], 0
        for end in range(self.page, len(ids) + 1, self.page):
            h = hash((h, tuple(ids[end - self.page:end])))
            keys.append(h)
        served = 0
        for k in keys:
            if k not in self.pages:
                break
            served += self.page
        for k in keys:
            self.pages[k] = None
            self.pages.move_to_end(k)
        while len(self.pages) > self.capacity:
            self.pages.popitem(last=False)
        served = min(served, max(0, len(ids) - 1))
        self.hits += served
        self.seen += len(ids)
        return served

    @property
    def hit_rate(self) -> float:
        return self.hits / self.seen if self.seen else 0.0
