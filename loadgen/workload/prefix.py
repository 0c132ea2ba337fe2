"""The unique start of every prompt, so a prefix cache cannot serve any request from another one.

A prompt begins with its request's tag, 8 digits that differ from the first digit group on between the
requests of a cell, and between cells and runs: tag = (seq · MULT + salt) mod 10⁸, where salt is a hash of
the run, the cell's load and its prompt length, and MULT ≈ 10⁸ · (golden ratio − 1), which spreads
consecutive sequence numbers as far apart as possible (the first three digits of the tags of a cell's first
thousand requests are nearly all distinct). Then come the run, the load and the length, for a reader:

    61803399 [<run_id> c<concurrency> n<context_tokens>]

So the only tokens two requests can share are those before the prompt's text: the chat template's opening
(and the BOS token), plus, when two tags happen to share their first digits, those digits' tokens (one token
per three digits on BPE tokenizers that group digits by three, one per digit on those that split them; rare
either way). The tag has a fixed width, so a prompt sized once keeps its token count when `relabel` gives it
another sequence number: the closed loop reuses sized prompts when a cell sends more requests than were sized.
"""

from __future__ import annotations

import re
import zlib

MULT = 61_803_399
MOD = 10**8
TAG = re.compile(r"^\d{8}(?= \[)", re.MULTILINE)  # at a line's start: after a shared prefix (--shared-prefix)


def unique_prefix(run_id: str, context_tokens: int, concurrency, seq: int) -> str:
    """`<tag> [<run_id> c<concurrency> n<context_tokens>]` and a newline."""
    label = f"[{run_id} c{concurrency} n{context_tokens}]"
    return f"{seq_tag(seq, zlib.crc32(label.encode()))} {label}\n"


def seq_tag(seq: int, salt: int = 0) -> str:
    """The 8-digit tag of sequence number `seq`: (seq · MULT + salt) mod 10⁸."""
    return f"{(seq * MULT + salt) % MOD:08d}"


def _retag(text: str, old_seq: int, new_seq: int) -> str:
    """`text` with its tag (the first line that starts with one: after a group's shared prefix, if any) moved
    from `old_seq` to `new_seq` (the tag is affine in seq, so the salt need not be known); a text without a
    tag is returned as it is."""
    m = TAG.search(text)
    if not m:
        return text
    new = (int(m.group()) + MULT * (new_seq - old_seq)) % MOD
    return f"{text[:m.start()]}{new:08d}{text[m.end():]}"


def relabel(body: dict, old_seq: int, new_seq: int) -> dict:
    """A copy of a request body whose prompt carries `new_seq` instead of `old_seq` in its unique prefix."""
    out = dict(body)
    if "messages" in out:
        msgs = [dict(m) for m in out["messages"]]
        msgs[0]["content"] = _retag(msgs[0]["content"], old_seq, new_seq)
        out["messages"] = msgs
    for key in ("prompt", "text"):
        if isinstance(out.get(key), str):
            out[key] = _retag(out[key], old_seq, new_seq)
    return out
