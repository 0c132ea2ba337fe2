"""`--per-token-events`: a server that streams one SSE event per token, as llama.cpp's llama-server does even
when a speculative verify step accepted several tokens.

The k tokens of a step become k content events, the running count advancing by one each, written back to
back in one write: llama-server's events of one step reach the client 0–80 µs apart, within one read or a
few; one write keeps them together whatever the load on the machine, so the step structure in the truth
(`chunk_tokens` = each step's k, `chunk_times_ns` = when it was written) is exactly what the client can find.
"""

from __future__ import annotations

from loadgen.sim.render import OpenAIChunks, sse, text_for


def step_events(chunks: OpenAIChunks, req, sent: int, k: int, finish: str | None) -> bytes:
    """The k one-token events of `req`'s step whose first token is number `sent`; the last carries `finish`."""
    return b"".join(sse(chunks.content(text_for(req, sent + i, 1), sent + i + 1, finish if i == k - 1 else None))
                    for i in range(k))
