"""Shared prefixes (`--shared-prefix G:T`): every prompt of a group opens with the same T tokens (the server's
count) and keeps its exact length; the figures of what a prefix cache could serve, on hand-built records; the
flag's checks. The simulator's cache serving them is shown in tests/test_sessions.py."""

from __future__ import annotations

import asyncio
import os

import pytest

from loadgen.metrics.shared_prefix import shared_prefix_figures
from loadgen.record import CellKey, Record
from loadgen.sim import tokenizer
from loadgen.workload.corpus import Corpus, stdlib_corpus
from loadgen.workload.prefix import relabel
from loadgen.workload.prompts import PromptBuilder

pytestmark = pytest.mark.unit
CELL = CellKey(300, 4)


async def count(texts: list[str]) -> list[int]:
    return [tokenizer.count(t) for t in texts]


def test_each_group_shares_exactly_its_tokens_and_every_prompt_keeps_its_length():
    builder = PromptBuilder("run1", 0, "m", Corpus(stdlib_corpus(200_000)), count, shared_prefix=(3, 120))
    texts = asyncio.run(builder.build(CELL, 9))
    assert [tokenizer.count(t) for t in texts] == [300] * 9
    heads = asyncio.run(builder.group_heads(CELL, 4))
    assert [tokenizer.count(h) for h in heads] == [120] * 3
    for i, text in enumerate(texts):
        assert text.startswith(heads[i % 3] + "\n")
        assert not any(text.startswith(h) for g, h in enumerate(heads) if g != i % 3)
    own = [t[len(heads[i % 3]) + 1:] for i, t in enumerate(texts[:3])]
    assert len({o[:8] for o in own}) == 3  # each request's own part opens with its own tag
    # a reused prompt (a duration-bound cell) keeps its group's opening and gets its new number
    body = relabel({"prompt": texts[1]}, 1, 10)["prompt"]
    assert body.startswith(heads[1] + "\n") and body != texts[1] and tokenizer.count(body) == 300
    assert os.path.commonprefix([texts[0], texts[3]]).startswith(heads[0])


def test_what_the_cache_could_serve_and_did():
    def rec(seq: int, cached: int | None) -> Record:
        return Record("r", CELL, seq, prompt_tokens=300, cached_tokens=cached, completion_tokens=4)
    # groups 0..2: seqs 0, 1, 2 are each group's first (cold); 3..8 could be served their 120 tokens
    recs = [rec(s, 0 if s < 3 else 120) for s in range(9)]
    f = shared_prefix_figures(recs, 3, 120)
    assert f == {"groups": 3, "tokens": 120, "cacheable_tokens": 720, "cacheable_fraction": pytest.approx(720 / 2700),
                 "cached_tokens": 720, "cached_of_cacheable": 1.0}
    half = [rec(s, 0 if s < 6 else 120) for s in range(9)]  # 3 of 6 prefilled before their group's first was cached
    assert shared_prefix_figures(half, 3, 120)["cached_of_cacheable"] == pytest.approx(0.5)
    assert shared_prefix_figures([rec(s, None) for s in range(4)], 3, 120)["cached_of_cacheable"] is None


def test_the_flag_is_checked_before_any_load(cli):
    url = ("--url", "http://127.0.0.1:9")
    for value, contexts, message in (("4", "600", "give GROUPS:TOKENS"), ("0:100", "600", "must be ≥ 1"),
                                     ("2:512", "60,600", "--contexts 60: a prompt holds the 512-token shared")):
        res = cli(*url, "--shared-prefix", value, "--contexts", contexts)
        assert res.returncode == 2 and message in res.stderr, res.stderr
