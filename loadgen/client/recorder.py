"""One streamed answer into its `Record`: body bytes in as they arrive, chunk times and token counts out.

Both senders (`h1_sender` over the lean HTTP/1.1 client, `aiohttp_sender`) hand every read's body bytes to
`StreamRecorder.feed` with `now`, the monotonic ns at which the read returned, and end with `finish`:

- `t_first_byte_ns`: `now` of the first read with body bytes; `t_first_token_ns`: of the first content event;
- each event with content is one chunk: `chunks += 1`, `chunk_gaps_ns += [now − now of the previous chunk]`,
  `chunk_tokens += [new_tokens]` (the server's running count; one chunk without a count makes the list None:
  only the final total is known); an event that adds tokens without content joins the previous chunk;
- reasoning (`reasoning_content` or `reasoning` deltas) is content, and also counted apart: `t_first_reasoning_ns`
  of its first chunk, `t_first_answer_ns` of the first chunk of the answer itself, and `reasoning_tokens`
  (usage's `completion_tokens_details.reasoning_tokens`, else Σ the reasoning chunks' running counts);
- a record with `abandon_after_tokens` N: the read that brings the output to N tokens (the server's running
  count, else content chunks) says STOP, so the sender closes the stream, and `finish` records it `abandoned`;
- `finish`: the server's prompt/completion counts and spec details; outcome "ok" only for a complete stream
  (`StreamState.incomplete_reason`), and when the running counts do not add up to the final completion count
  the final count wins and `chunk_tokens` is None.

`feed` is the per-read hot path of the client (docs/performance.md): the whole SSE events of the stream's
template are read in one call (`template_reader.read_template`) from where the SSE parser holds nothing: the
read's start, the end of the event the parser held the start of (a read of a fast stream often ends inside an
event), or the end of one of the stream's first events (the whole answer can be one read); the others are handled
inline, one `StreamState.feed` call each, and nothing else is called per event.
"""

from __future__ import annotations

import time

from loadgen.client.sse import SseParser
from loadgen.client.stream import StreamState
from loadgen.client.template_reader import read_chunked_template, read_template
from loadgen.names import Api, Outcome
from loadgen.record import Record

MORE, END, STOP = 0, 1, 2  # what `feed` says: read on; the answer is complete ([DONE]); stop (error event)
LEARNING, READING = 1, 2  # `whole_chunks` (0: off): each chunk as it is decoded; and a chunk a read ends inside held
SNIPPET = 200
LEADING_EVENTS = 4  # a stream's first events (role, first content) go to the parser one at a time: a fast server's
# whole answer can be one read, and the template learnt from its first content event then reads the rest
ERROR_BODY_MAX = 4096  # bytes of a non-200 body read for its error message
CANCELLED = "cancelled before the response ended"


def one_line(text: str) -> str:
    """An error snippet for a record: one line, at most SNIPPET characters."""
    return " ".join(text.split())[:SNIPPET]


def http_error(status: int, body: bytes) -> str:
    """The error of a non-200 answer: `HTTP <status>: <start of the body>`, one line."""
    return one_line(f"HTTP {status}: {body[:ERROR_BODY_MAX].decode('utf-8', 'replace')}")


class StreamRecorder:
    """Fills one request's record from its streamed body."""

    __slots__ = ("rec", "state", "parser", "chunk_tokens", "last_token_ns", "abandon_at", "abandoned", "reasoning",
                 "leading", "whole_chunks", "parser_idle")

    def __init__(self, rec: Record, api: Api):
        self.rec = rec
        self.state = StreamState(api=api)
        self.parser = SseParser()
        self.parser_idle = False  # `parser.idle` as its last `feed` left it (only `feed` changes it; a new parser
        # looks for a BOM): every read asks, and a property's call costs more there than the read's run of one write
        self.chunk_tokens: list[int] | None = []
        self.last_token_ns = 0
        self.abandon_at = rec.abandon_after_tokens  # close the stream at this many output tokens (None: never)
        self.abandoned = False
        self.reasoning = 0  # Σ running-count tokens of the reasoning chunks
        self.leading = LEADING_EVENTS  # events still to give the parser one at a time
        if rec.session is not None:
            self.state.answer = []  # a session's next turn sends this answer back
        # a chunked body's reader gives each chunk here as it is decoded, and the next ones to `read_chunks`: while
        # the stream may learn its template (not a session's turn: its text is kept) or reads it
        self.whole_chunks = LEARNING if rec.session is None and self.abandon_at is None else 0

    def feed(self, data: bytes, now: int) -> int:
        """Record the events of one read of body bytes; MORE, END or STOP. Raises `ProtocolError` (what came
        before the bad event stays recorded)."""
        rec = self.rec
        if rec.t_first_byte_ns is None:
            rec.t_first_byte_ns = now
        state, parser, said = self.state, self.parser, MORE
        while data and said == MORE:
            if self.parser_idle:  # the whole SSE events of the stream's template from here on, without the parser
                pos = read_template(state, data, 0, True, self.chunk_tokens)
                if pos:
                    data = data[pos:]
                    self._run(now)
                    self.whole_chunks = READING if self.abandon_at is None else 0
            # one event to the parser: the one it holds the start of, or one of the stream's first (a template
            # learnt from it reads the rest of the read); else the whole rest
            end = data.find(b"\n\n") + 2 if self.leading and not state.finished or not self.parser_idle else 0
            if 1 < end < len(data):
                part, data = data[:end], data[end:]
                self.leading -= self.leading > 0
            else:
                part, data = data, b""
            if part:
                events = parser.feed(part)
                self.parser_idle = parser.idle
                said = self._events(events, now)
        return said if self.abandon_at is None else self._abandon(said, self.abandon_at)

    def read_chunks(self, data: bytes, pos: int, now: int) -> int:
        """Record the template's events of a chunked body read at `now` from `data[pos:]`, where a chunk starts,
        one whole event a chunk (`read_chunked_template`); returns where the first other chunk starts. The
        connection calls it while `whole_chunks`, having given this reader every chunk before `pos`; once the
        template reads (READING), it holds a chunk that a read ends inside until the next read makes it whole. An
        event the template cannot read ends the calls (0) until a read's run reads the template again; before the
        template is learnt, only once the stream's first events are read."""
        state = self.state
        if self.parser_idle:
            end = read_chunked_template(state, data, pos, self.chunk_tokens)
            if end > pos:
                self._run(now)
                self.whole_chunks = READING
                return end
        if state._framed is not None or state.finished or self.leading <= 0:  # declined, or nothing to learn
            self.whole_chunks = 0
        else:
            self.leading -= 1
        return pos

    def _events(self, events: list[bytes], now: int) -> int:  # noqa: C901 (the per-event hot path, inline)
        """Record the events the parser gave for a part of a read at `now`; MORE, END or STOP. The chunks
        before a bad event are recorded (stamping a read's chunks in parts gives the times of one stamp)."""
        rec, state, feed = self.rec, self.state, self.state.feed
        chunk_tokens, chunks, said = self.chunk_tokens, 0, MORE
        answered = rec.t_first_answer_ns is not None
        try:
            for event in events:
                if feed(event):
                    chunks += 1
                    if state.reasoning_event or not answered:
                        self._kind(now)
                        answered = rec.t_first_answer_ns is not None
                    if chunk_tokens is not None:
                        n = state.new_tokens
                        if n is None:
                            chunk_tokens = self.chunk_tokens = None
                        else:
                            chunk_tokens.append(n)
                    continue
                # events without content: count-only ones belong to the last chunk; [DONE] and errors end it
                if state.new_tokens and chunk_tokens:
                    chunk_tokens[-1] += state.new_tokens
                if state.done or state.error:
                    said = END if state.done else STOP
                    break
        finally:
            if chunks:
                self._stamp(now, chunks)
        return said

    def _run(self, now: int) -> None:
        """Record the content chunks of a run of template events read at `now` (answer chunks, their counts
        appended to `chunk_tokens` if they have them, else the list is None): the answer's first chunk may be
        among them."""
        state = self.state
        chunks = state.run_chunks
        if chunks:
            if self.rec.t_first_answer_ns is None:
                self.rec.t_first_answer_ns = now
            if not state.run_counts:
                self.chunk_tokens = None
            self._stamp(now, chunks)

    def _stamp(self, now: int, chunks: int) -> None:
        """The times of `chunks` content chunks that arrived in one read at `now`: the first one's gap to the
        chunk before (or the first token's time), then a gap of 0 for each of the others."""
        rec, last = self.rec, self.last_token_ns
        gaps = rec.chunk_gaps_ns
        if last:
            gaps.append(now - last)
        else:
            rec.t_first_token_ns = now
        if chunks > 1:
            gaps.extend([0] * (chunks - 1))
        self.last_token_ns, rec.chunks = now, rec.chunks + chunks

    def _kind(self, now: int) -> None:
        """A reasoning chunk (its time if first, its tokens), or the answer's first chunk."""
        rec, state = self.rec, self.state
        if not state.reasoning_event:
            rec.t_first_answer_ns = now
            return
        if rec.t_first_reasoning_ns is None:
            rec.t_first_reasoning_ns = now
        self.reasoning += state.new_tokens or 0

    def _abandon(self, said: int, abandon_at: int) -> int:
        """STOP once the output reached `abandon_at` tokens (the stream is closed on purpose)."""
        if said == MORE and self.tokens_so_far() >= abandon_at:
            self.abandoned, said = True, STOP
        return said

    def tokens_so_far(self) -> int:
        """Output tokens received: the server's running count, else one per content chunk."""
        state = self.state
        return state.completion_tokens or 0 if state.running_counts else self.rec.chunks

    def finish(self, outcome: Outcome | None, error: str | None) -> Record:
        """End the record: `outcome` and `error` when the request failed, None to judge it by the stream.
        `t_end_ns` is now unless the sender has set it."""
        rec, state, chunk_tokens = self.rec, self.state, self.chunk_tokens
        if self.abandoned:
            outcome, error = Outcome.ABANDONED, f"closed by the client after {self.tokens_so_far()} tokens " \
                                                "(--cancel-after-tokens)"
        if not rec.t_end_ns:
            rec.t_end_ns = time.monotonic_ns()
        rec.t_last_token_ns = self.last_token_ns or None
        rec.prompt_tokens = state.prompt_tokens
        rec.completion_tokens = state.completion_tokens
        rec.cached_tokens = state.cached_tokens
        rec.spec = state.spec
        if state.answer is not None:
            rec.answer = "".join(state.answer)
        if rec.t_first_reasoning_ns is not None:  # the server's count, else the reasoning chunks' running counts
            rec.reasoning_tokens = state.reasoning_tokens or self.reasoning
        rec.chunk_tokens = chunk_tokens
        if outcome is None:
            reason = state.incomplete_reason()
            if reason is None:
                rec.outcome = Outcome.OK
                if chunk_tokens is not None and sum(chunk_tokens) != state.completion_tokens:
                    # running counts disagree with the final usage: the final total wins, per-chunk data is dropped
                    rec.chunk_tokens = None
                return rec
            outcome = Outcome.PROTOCOL_ERROR if state.error is None else Outcome.HTTP_ERROR
            error = reason
        rec.outcome = outcome
        rec.error = error
        return rec
