"""Exact prompt lengths and unique prefixes, with fake tokenizers in place of the server's."""

from __future__ import annotations

import asyncio
import re

import pytest

from loadgen.workload.prefix import relabel, unique_prefix
from loadgen.workload.sizing import fit_prompts

pytestmark = pytest.mark.unit


async def words(texts: list[str]) -> list[int]:
    return [len(re.findall(r"\w+|[^\w\s]", t)) for t in texts]


async def heavy_x(texts: list[str]) -> list[int]:
    """One token per visible character, two for an "x": a cut that takes one more "x" jumps by two tokens."""
    return [len(re.findall(r"\S", t)) + t.count("x") for t in texts]


BODY = "alpha beta, gamma (delta) epsilon; " * 40


@pytest.mark.parametrize("count", [words, heavy_x])
@pytest.mark.parametrize("target", [30, 77, 150])
def test_every_prompt_counts_exactly_its_target(count, target):
    prefixes = [unique_prefix("run", 60, 1, i) for i in range(3)]
    texts, counts = asyncio.run(fit_prompts(prefixes, [BODY, BODY[5:], "x " * 300], [target] * 3, count))
    assert counts == [target] * 3
    assert all(t.startswith(p) for t, p in zip(texts, prefixes))


def test_a_body_too_short_gives_all_it_has():
    texts, counts = asyncio.run(fit_prompts(["p "], ["x y z"], [50], words))
    assert texts == ["p x y z"] and counts == [4]


def test_relabel_keeps_the_length_and_changes_only_the_number():
    body = {"messages": [{"role": "user", "content": unique_prefix("run", 60, 4, 3) + "text"}], "model": "m"}
    out = relabel(body, 3, 1234)
    assert out["messages"][0]["content"] == unique_prefix("run", 60, 4, 1234) + "text"
    assert len(out["messages"][0]["content"]) == len(body["messages"][0]["content"])
    assert body["messages"][0]["content"] == unique_prefix("run", 60, 4, 3) + "text"  # the original is not changed


def test_prompts_differ_from_their_first_digit_group_on():
    """The unique part comes first: a cell's requests, other cells and other runs differ in the tag's first
    three digits (the first token after the chat template on tokenizers that group digits by three)."""
    cell = [unique_prefix("run", 60, 1, i) for i in range(200)]
    assert len({p[:3] for p in cell[:64]}) == 64
    assert len({p[:3] for p in cell}) >= 190
    others = [unique_prefix("run", 60, 2, 0), unique_prefix("run", 128, 1, 0), unique_prefix("run2", 60, 1, 0)]
    assert len({p[:3] for p in [cell[0], *others]}) == 4
    assert all(re.match(r"\d{8} \[run", p) for p in cell)


def test_relabel_leaves_a_prompt_without_a_tag_alone():
    body = {"prompt": "no tag here", "model": "m"}
    assert relabel(body, 3, 9)["prompt"] == "no tag here"


def test_a_cut_that_jumps_past_the_target_is_padded():
    texts, counts = asyncio.run(fit_prompts(["p"], ["x " * 50], [10], heavy_x))  # p=1, each x=2: 9 or 11
    assert counts == [10] and texts[0].endswith(" .")


async def whole_chat_request(texts: list[str]) -> list[int]:
    """A whole chat request counted at once: the text's last symbols merge with the template's closing
    ("… .<|im_end|>" is one piece), so a " ." pad adds no token, and a trailing space joins the template too."""
    return [len(re.findall(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+", "<|im_start|>user\n" + t + "<|im_end|>\n")) for t in texts]


@pytest.mark.parametrize("target", [40, 41, 60, 97, 128])
def test_exact_where_the_text_merges_with_the_template(target):
    prefixes = [unique_prefix("run", target, 1, i) for i in range(4)]
    bodies = [BODY, BODY[3:], "x y. z, " * 80, "word " * 200]
    texts, counts = asyncio.run(fit_prompts(prefixes, bodies, [target] * 4, whole_chat_request))
    assert counts == [target] * 4
    assert all(t.startswith(p) for t, p in zip(texts, prefixes))
