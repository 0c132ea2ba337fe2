"""Reading one request's streamed events: one small state machine per request, of its API's class, tested with
tables of inputs.

Token counts always come from the server, wherever it puts them: OpenAI routes carry `usage` (running usage in
every chunk when the server honours `continuous_usage_stats`; else a final usage chunk with `choices: []`, or
the finish chunk itself, as llama.cpp's `/v1/completions` does); an engine's own fields beside it are read by
its adapter's `FieldReader`s (`engines.registry.FIELD_READERS`) into `EventCounts`, only in events that are not
plain content chunks. SGLang's `/generate` carries a cumulative `completion_tokens` in every event's meta object
(`engines.sglang.GENERATE_META`). A usage that arrives after content events without counts is a total, not a
running count. Cached prompt tokens: `usage.prompt_tokens_details.cached_tokens` or an engine's field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from loadgen.client.template_reader import LEARNS, learnt, read_template
from loadgen.engines.base import EventCounts, FieldReader
from loadgen.engines.registry import CHUNK_FIELD, CHUNK_READERS, FIELD_READERS
from loadgen.engines.sglang import GENERATE_META, read_generate_meta
from loadgen.names import Api

CHAT_TEXT = ("choices", 0, "delta", "content")
COMPLETION_TEXT = ("choices", 0, "text")


class ProtocolError(ValueError):
    """Not the API's stream format (a `ValueError`: what `h1_connection` expects of a body reader's failure)."""


@dataclass(slots=True)
class StreamState:
    """Reads one request's events in order.

    After each `feed`, `new_tokens` is the number of tokens the event added (0 for events without content;
    None when the server gives no running count, in which case only the final total is known) and
    `content` tells whether the event carried generated text (the TTFT event is the first with content).

    `StreamState(api=…)` is an instance of the API's own class (`STATES`): the event reader is chosen once, when
    the request's state is made, and each class's `_parse` reads an event without asking which API it speaks
    (the lines they share, the event's JSON, are written out in each: a call per event to share them would cost
    more than the test of the API they replace). The stream's template events skip the JSON (`template_reader`).
    """

    api: Api
    done: bool = False
    finished: bool = False  # a finish_reason was seen
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    spec: dict | None = None
    cached_tokens: int | None = None
    error: str | None = None
    content: bool = False
    new_tokens: int | None = 0
    _running_tokens: int = 0
    _uncounted: bool = False  # a content event came without a running count: a later usage is a total
    running_counts: bool = field(default=False)
    answer: list[str] | None = None  # the answer's text pieces, kept when a list is given (a session's turn)
    reasoning_event: bool = False  # the last content event carried reasoning (reasoning_content / reasoning)
    reasoning_tokens: int | None = None  # usage's completion_tokens_details.reasoning_tokens (or reasoning_tokens)
    learns_left: int = LEARNS  # 0: every event is read by the full parse (tests compare the two paths)
    run_chunks: int = 0  # read_template: the content events of its last run (`run_counts`: they carry counts)
    run_counts: bool = False
    _template: tuple | None = None  # the stream's plain content events (an event_template.Template, as a tuple)
    _framed: tuple | None = None  # the same, as SSE events
    _chunk: tuple | None = None  # as chunks: head, rest format + CRLF, first, second, rests cache, _framed
    _step: int = 0  # tokens the last counted content event added: the next one's count is predicted with it

    def __new__(cls, api: Api, *args, **kwargs):
        return object.__new__(STATES[api] if cls is StreamState else cls)

    def feed(self, payload: bytes) -> bool:
        """Read one event; returns `content` (so a caller's loop needs no attribute read for it). An event of
        the stream's template is read without its JSON (`read_template`), any other by the API's `_parse`."""
        if self._template is not None and read_template(self, payload, 0, False, None):
            return self.content
        return self._parse(payload)

    def _parse(self, payload: bytes) -> bool:
        """The full parse of one event: each API's common case inline (the event's JSON, then an OpenAI chunk
        with choices or a `/generate` event with its meta object); error objects are looked for only in events
        that are not chunks (no choices / no meta object), where servers put them. Every branch sets `content`
        and `new_tokens` once; events that set `done` or `error` never carry content."""
        raise NotImplementedError

    def _done(self) -> bool:
        self.content, self.new_tokens, self.done = False, 0, True
        return False

    def _no_choices(self, obj: dict, choices) -> bool:
        """An OpenAI event without choices: an error object, an engine's own event or the final usage."""
        if not self._error(obj):
            self._feed_openai_meta(obj, choices)
        return False

    def _feed_text(self, obj: dict, usage: dict | None, text: bool) -> bool:
        """An event with choices: counted when it carries usage or the engine field that rides on chunks
        (`CHUNK_FIELD`), else a chunk whose tokens are not known (`text`: it has content)."""
        if usage or CHUNK_FIELD in obj:
            return self._feed_counted(obj, usage, text)
        self._uncounted = self._uncounted or text
        self.content = text
        self.new_tokens = None if text else 0
        return text

    def _feed_counted(self, obj: dict, usage: dict | None, text: bool) -> bool:
        """A chunk with choices and usage (or an engine's chunk field): a running count, or, after content
        without counts (llama.cpp's finish chunk), the request's totals."""
        if usage is not None and not (self._uncounted or self.finished) and CHUNK_FIELD not in obj:
            ct = usage.get("completion_tokens")
            if ct is not None:  # a running count mid-stream, the common event: the totals come at the end
                new = self.new_tokens = ct - self._running_tokens
                self.running_counts, self._running_tokens = True, ct
                self.completion_tokens = ct
                content = self.content = text or new > 0
                return content
        self._totals(obj, usage, CHUNK_READERS)
        ct = usage.get("completion_tokens") if usage else None
        if ct is None or self._uncounted:
            self._uncounted = self._uncounted or text
            self.content, self.new_tokens = text, (None if text else 0)
            return text
        new = self.new_tokens = ct - self._running_tokens
        self.running_counts, self._running_tokens = True, ct
        content = self.content = text or new > 0
        return content

    def _totals(self, obj: dict, usage: dict | None, readers: tuple[FieldReader, ...]) -> None:
        """The counts of the engine fields `readers` read and of a usage object; usage wins where both give one."""
        for reader in readers:
            value = obj.get(reader.key)
            if value is not None and (counts := reader.read(value)) is not None:
                self._fill(counts)
        if not usage:
            return
        if usage.get("prompt_tokens") is not None:
            self.prompt_tokens = usage["prompt_tokens"]
        if usage.get("completion_tokens") is not None:
            self.completion_tokens = usage["completion_tokens"]
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            self.cached_tokens = int(details["cached_tokens"])
        out = usage.get("completion_tokens_details")
        reasoning = out.get("reasoning_tokens") if isinstance(out, dict) else usage.get("reasoning_tokens")
        if isinstance(reasoning, int) and not isinstance(reasoning, bool):
            self.reasoning_tokens = reasoning

    def _fill(self, counts: EventCounts) -> None:
        """An engine field's counts where none is known yet (a usage read after them overrides), and its spec."""
        if self.completion_tokens is None:
            self.completion_tokens = counts.completion_tokens
        if self.prompt_tokens is None:
            self.prompt_tokens = counts.prompt_tokens
        if self.cached_tokens is None:
            self.cached_tokens = counts.cached_tokens
        if counts.spec is not None:
            self.spec = counts.spec

    def _error(self, obj: dict) -> bool:
        """An error object sent as an event (`{"error": ...}`, or OpenAI's `{"object": "error", ...}`)."""
        err = obj.get("error")
        if not err and obj.get("object") != "error":
            return False
        self.content, self.new_tokens = False, 0
        if err:
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        else:
            self.error = str(obj.get("message", "error"))[:300]
        return True

    def _feed_openai_meta(self, obj: dict, choices) -> None:
        """An OpenAI event without choices: an engine's own event or the final usage (no `choices`: an error)."""
        self.content, self.new_tokens = False, 0
        if choices is None:
            raise ProtocolError(f"event has no 'choices': {orjson.dumps(obj)[:120]!r}")
        self._totals(obj, obj.get("usage"), FIELD_READERS)

    def incomplete_reason(self) -> str | None:
        """Why a stream that ended is not a complete response, or None when it is."""
        if self.error:
            return f"server error in stream: {self.error}"
        if not self.done:
            return "stream ended without [DONE]"
        if self.completion_tokens is None:
            return "stream ended without token usage (server ignored stream_options.include_usage?)"
        return None


def _bad_event(payload: bytes, what: str) -> ProtocolError:
    return ProtocolError(f"event is not {what}: {payload[:120]!r}")


@dataclass(slots=True)
class ChatState(StreamState):
    """`/v1/chat/completions`: the text is the first choice's `delta` (its content or reasoning)."""

    def _parse(self, payload: bytes) -> bool:
        if payload == b"[DONE]":
            return self._done()
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _bad_event(payload, "JSON") from None
        if type(obj) is not dict:
            raise _bad_event(payload, "a JSON object")
        choices = obj.get("choices")
        if not choices:
            return self._no_choices(obj, choices)
        choice = choices[0]
        delta = choice.get("delta")
        content = delta.get("content") if delta else None
        reasoning = self.reasoning_event = bool(not content and delta and (delta.get("reasoning_content")
                                                                           or delta.get("reasoning")))
        text = bool(content) or reasoning
        if content and self.answer is not None:
            self.answer.append(content)
        if choice.get("finish_reason"):
            self.finished = True
        usage = obj.get("usage")
        said = self._feed_text(obj, usage, text)
        if self.learns_left > 0 or self._template is not None:
            plain = type(delta) is dict and not (delta.get("reasoning_content") or delta.get("reasoning"))
            learnt(self, payload, obj, CHAT_TEXT, b'"content":', content if plain else None, usage)
        return said


@dataclass(slots=True)
class CompletionsState(StreamState):
    """`/v1/completions`: the text is the first choice's `text`."""

    def _parse(self, payload: bytes) -> bool:
        if payload == b"[DONE]":
            return self._done()
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _bad_event(payload, "JSON") from None
        if type(obj) is not dict:
            raise _bad_event(payload, "a JSON object")
        choices = obj.get("choices")
        if not choices:
            return self._no_choices(obj, choices)
        choice = choices[0]
        value = choice.get("text")
        text = bool(value)
        if choice.get("finish_reason"):
            self.finished = True
        usage = obj.get("usage")
        said = self._feed_text(obj, usage, text)
        if self.learns_left > 0 or self._template is not None:
            learnt(self, payload, obj, COMPLETION_TEXT, b'"text":', value, usage)
        return said


@dataclass(slots=True)
class GenerateState(StreamState):
    """SGLang's `/generate`: a cumulative `completion_tokens` in each event's `GENERATE_META`; an error has none."""

    def feed(self, payload: bytes) -> bool:
        if payload == b"[DONE]":
            return self._done()
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _bad_event(payload, "JSON") from None
        if type(obj) is not dict:
            raise _bad_event(payload, "a JSON object")
        meta = obj.get(GENERATE_META)
        if meta is None:
            if GENERATE_META not in obj and self._error(obj):
                return False
            self.content, self.new_tokens = False, 0
            raise ProtocolError(f"event has no '{GENERATE_META}': {orjson.dumps(obj)[:120]!r}")
        ct = meta.get("completion_tokens")
        if ct is None:
            self.content, self.new_tokens = False, 0
            raise ProtocolError(f"{GENERATE_META} has no completion_tokens")
        self.running_counts = True
        self.new_tokens = ct - self._running_tokens
        self._running_tokens = ct
        self.content = self.new_tokens > 0
        self.completion_tokens = ct
        prompt, cached, spec = read_generate_meta(meta)  # each count it gives replaces the last event's
        self.prompt_tokens = self.prompt_tokens if prompt is None else prompt
        self.cached_tokens = self.cached_tokens if cached is None else cached
        if meta.get("finish_reason"):
            self.finished = True
        if spec is not None:
            self.spec = spec
        return self.content


STATES: dict[Api, type[StreamState]] = {
    Api.OPENAI_CHAT: ChatState,
    Api.OPENAI_COMPLETIONS: CompletionsState,
    Api.SGLANG_GENERATE: GenerateState,
}
