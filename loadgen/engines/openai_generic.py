"""A server that speaks the OpenAI routes and nothing of its own: the fallback when no adapter recognises it.

It has no info route, no metric names loadgen reads, no tokenize route and no speculative-decoding fields, so
its server info is empty, prompt lengths are estimated from a probe (unless a tokenize route of another engine
answers), and its accept length comes from the stream's chunks only.
"""

from __future__ import annotations

from loadgen.engines.base import EngineAdapter


class OpenAIGeneric(EngineAdapter):
    name = "openai"
    title = "OpenAI-compatible server"
    recognised_by = ("anything no other adapter recognises",)


ADAPTER = OpenAIGeneric()
