"""Each engine's reader of its own answer fields (`EngineAdapter.field_readers`), with tables of values, and the
stream state taking their counts: usage wins over an engine field's counts, the spec is the field's."""

from __future__ import annotations

import orjson
import pytest

from loadgen.client.stream import StreamState
from loadgen.engines import registry
from loadgen.engines.base import EventCounts
from loadgen.engines.llamacpp import read_timings
from loadgen.engines.sglang import read_generate_meta, read_sglext
from loadgen.names import Api

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("timings, counts", [
    ({"prompt_n": 5, "cache_n": 3, "predicted_n": 20, "draft_n": 9, "draft_n_accepted": 4},
     EventCounts(8, 20, 3, {"draft_n": 9, "draft_n_accepted": 4})),
    ({"prompt_n": 5, "predicted_n": 20}, EventCounts(5, 20, None, None)),
    ({"draft_n": 6}, EventCounts(None, None, None, {"draft_n": 6, "draft_n_accepted": 0})),
    ({}, EventCounts()),
    ([1, 2], None),
])
def test_llamacpp_timings(timings, counts):
    assert read_timings(timings) == counts


@pytest.mark.parametrize("ext, spec", [
    ({"spec_tokens_details": {"spec_verify_ct": 4}}, {"spec_verify_ct": 4}),
    ({"spec_tokens_details": [{"spec_verify_ct": 2}, {"spec_verify_ct": 3}]}, {"spec_verify_ct": 2}),
    ({"other": 1}, None),
    ("text", None),
])
def test_sglang_sglext(ext, spec):
    counts = read_sglext(ext)
    assert (counts.spec if counts else None) == spec


def test_sglang_generate_meta():
    meta = {"prompt_tokens": 7, "completion_tokens": 3, "cached_tokens": 2.0, "spec_verify_ct": 2,
            "spec_accept_length": 1.5, "finish_reason": None}
    assert read_generate_meta(meta) == (7, 2, {"spec_verify_ct": 2, "spec_accept_length": 1.5})
    assert read_generate_meta({"completion_tokens": 3}) == (None, None, None)


def test_the_registry_gathers_the_readers_and_one_chunk_field():
    assert [r.key for r in registry.FIELD_READERS] == ["sglext", "timings"]
    assert registry.CHUNK_FIELD == "timings"


def _chat(*events: dict) -> StreamState:
    state = StreamState(api=Api.OPENAI_CHAT, learns_left=0)
    for e in events:
        state.feed(orjson.dumps(e))
    state.feed(b"[DONE]")
    return state


def test_the_stream_takes_an_engine_fields_counts_where_usage_gives_none():
    text = {"choices": [{"delta": {"content": "a"}, "finish_reason": None}]}
    finish = {"choices": [{"delta": {}, "finish_reason": "length"}],
              "timings": {"prompt_n": 4, "cache_n": 1, "predicted_n": 2, "draft_n": 3, "draft_n_accepted": 1}}
    state = _chat(text, text, finish)
    assert (state.prompt_tokens, state.completion_tokens, state.cached_tokens) == (5, 2, 1)
    assert state.spec == {"draft_n": 3, "draft_n_accepted": 1}
    usage = {"choices": [], "usage": {"prompt_tokens": 6, "completion_tokens": 2}}
    state = _chat(text, text, finish, usage)
    assert (state.prompt_tokens, state.completion_tokens, state.cached_tokens) == (6, 2, 1)


def test_a_field_that_comes_in_an_event_of_its_own_is_read_only_there():
    """SGLang's sglext is read in an event without choices, not on a content chunk (as before the adapters
    read it)."""
    details = {"spec_verify_ct": 2}
    text = {"choices": [{"delta": {"content": "a"}, "finish_reason": None}]}
    on_chunk = {**text, "usage": {"completion_tokens": 1}, "sglext": {"spec_tokens_details": details}}
    assert _chat(on_chunk).spec is None
    assert _chat(text, {"choices": [], "sglext": {"spec_tokens_details": details}}).spec == details
