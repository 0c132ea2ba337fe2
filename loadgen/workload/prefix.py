"""The unique first line of every prompt, so a prefix cache cannot serve any request from an earlier one.

The line names the run, the cell and the request's sequence number. The number has a fixed width
(`#00000042`), so a prompt sized once keeps its token count when `relabel` gives it another number: the
closed loop reuses sized prompts when a cell sends more requests than were sized.
"""

from __future__ import annotations


def unique_prefix(run_id: str, context_tokens: int, concurrency, seq: int) -> str:
    """`[<run_id> c<concurrency> n<context_tokens> #<seq, 8 digits>]` and a newline."""
    return f"[{run_id} c{concurrency} n{context_tokens} {seq_tag(seq)}]\n"


def seq_tag(seq: int) -> str:
    return f"#{seq:08d}"


def relabel(body: dict, old_seq: int, new_seq: int) -> dict:
    """A copy of a request body whose prompt carries `new_seq` instead of `old_seq` in its unique prefix."""
    old, new = seq_tag(old_seq), seq_tag(new_seq)
    out = dict(body)
    if "messages" in out:
        msgs = [dict(m) for m in out["messages"]]
        msgs[0]["content"] = msgs[0]["content"].replace(old, new, 1)
        out["messages"] = msgs
    for key in ("prompt", "text"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace(old, new, 1)
    return out
