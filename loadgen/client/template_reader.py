"""Reading the events of a stream's template (`loadgen.client.event_template`) into its state, without their JSON.

The part of `loadgen.client.stream.StreamState`'s reading that learns the template from an event the full parse read
(`learnt`) and reads later events of it (`read_template`): one event (`StreamState.feed`), or, straight from a
read's bytes while the SSE parser holds nothing, the run of whole SSE events of the template it begins with
(`StreamRecorder.feed`: no SSE split, no call per event), or straight from a chunked HTTP body, one event a chunk,
without decoding its framing first (`read_chunked_template`, `StreamRecorder.read_chunks`). Any way each event is
read as the full parse reads the event the template was learnt from, with this event's text and count: the running
count's branch of `StreamState._feed_counted` (a counted template), else a chunk without counts; the full parse
itself stays the one place that decides what any other event means.

Size exception: read_chunked_template, one loop over a read's chunks inline (a call per event would cost what
the chunk-level read saves: docs/performance.md, *The event template*).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.client.event_template import (
    ASCII_TEXT,
    MAX_COUNT,
    MAX_KNOWN_COUNTS,
    family_template,
    known_rests,
    learn,
    read_count,
    remember_family,
    rest_for,
    sibling,
    sse_template,
    utf8_text,
)
from loadgen.client.h1_parse import CHUNK_SIZES, HttpFormatError, remember_chunk_size
from loadgen.engines.registry import CHUNK_FIELD

if TYPE_CHECKING:
    from loadgen.client.stream import StreamState

LEARNS = 8  # templates a stream may learn (a shape that keeps changing is read by the full parse)


def read_template(state: StreamState, buf: bytes, pos: int, framed: bool,  # noqa: C901 (the hot path)
                  tokens: list[int] | None) -> int:
    """Reads the template's events in `buf` from `pos` on while they are of it (`framed`: SSE events, `data: `,
    the event and a blank line, one after the other; else `buf` is one event); returns where the first event not
    read starts. The state is left as after the last one; `run_chunks`: the content events read, `run_counts`:
    they carry counts, which are appended to `tokens` (None: not kept). The count is tried as predicted (the last
    count plus the last step), then as written (`read_count`)."""
    tpl = state._framed if framed else state._template
    if tpl is None:
        return pos
    head, fmt, first, second, _, _ = tpl
    h, n, start = len(head), len(buf), pos
    # a count that went down is the full parse's to read (its step joins the chunk before): none is predicted
    running, step, chunks, text = state._running_tokens, state._step, 0, False
    step = step if step > 0 else 0
    while buf.startswith(head, pos):
        t, new = pos + h, step
        e = buf.find(b'"', t)
        ct = running + step
        rest = fmt if first is None else fmt % (ct + first) if second is None else fmt % (ct + first, ct + second)
        if e < 0 or not buf.startswith(rest, e) or first is not None and not 0 <= ct < MAX_COUNT:
            ct = -1 if e < 0 or first is None else read_count(tpl, buf, e)  # not as predicted: as written?
            if ct < 0 or ct < running:  # not read, or lower than the last count
                break
            rest, new = rest_for(tpl, ct), ct - running
        end = e + len(rest)
        if not framed and end != n or buf[t:e].strip(ASCII_TEXT) and not utf8_text(buf[t:e]):
            break
        pos, step, text = end, new, e > t
        if first is None:
            chunks += text
            continue
        running = ct
        if text or step > 0:
            chunks += 1
            if tokens is not None:
                tokens.append(step)
    if pos > start:
        _after_run(state, first is not None, running, step, text, chunks)
    return pos


def read_chunked_template(state: StreamState, buf: bytes, pos: int,  # noqa: C901 (the hot path)
                          tokens: list[int] | None) -> int:
    """`read_template` of SSE events straight from a chunked HTTP body: reads the chunks in `buf` from `pos` (where
    a chunk-size line starts) while each is one whole SSE event of the template, followed by its CRLF; returns
    where the first other chunk starts. The chunk's end is known from its size, so the event's rest is tried there,
    as predicted, then as written after the text's closing quote. A size line that is not one ends the run: the
    connection's decoder reads it again and fails the response there. Called only where the SSE parser holds
    nothing, as `read_template` is: the decoder would have given this event's bytes, whole, to an idle parser,
    which yields this one event and is idle again."""
    chunk = state._chunk
    if chunk is None:
        return pos
    head, fmt, first, second, rests, tpl = chunk  # `fmt`: the rest and the CRLF after the chunk's data, one check
    h, start, sizes, find, startswith, ascii_text = len(head), pos, CHUNK_SIZES, buf.find, buf.startswith, ASCII_TEXT
    # a count that went down is the full parse's to read (its step joins the chunk before): none is predicted
    running, step, chunks, text = state._running_tokens, state._step, 0, b""  # `text`: the last event's
    step = step if step > 0 else 0
    shared, rests = rests is not None, {} if rests is None else rests  # kept only where other streams read them
    tokens = [] if tokens is None else tokens  # counts not kept go to a list dropped after the run: one test less
    append, kept = tokens.append, len(tokens)
    while True:
        nl = find(b"\r\n", pos)
        if nl < 0:
            break
        try:
            size = sizes[buf[pos:nl]]
        except KeyError:
            try:
                size = remember_chunk_size(buf[pos:nl])
            except HttpFormatError:  # the decoder reads it again and fails the response where it is
                break
        t, end = nl + 2 + h, nl + 4 + size  # `end`: after the CRLF
        if not startswith(head, nl + 2):
            break
        ct = running + step
        rest = rests.get(ct)  # only counts in range are kept there
        if rest is None:
            rest = fmt if first is None else fmt % (ct + first) if second is None else fmt % (ct + first, ct + second)
            if first is None or 0 <= ct < MAX_COUNT:
                e = end - len(rest)
                if shared and len(rests) < MAX_KNOWN_COUNTS:
                    rests[ct] = rest
            else:
                e = -1  # out of the full parse's exact range: none is predicted
        else:
            e = end - len(rest)
        if e < t or not startswith(rest, e):
            e = find(b'"', t, end - 2)  # not as predicted: as written?
            ct = -1 if e < 0 or first is None else read_count(tpl, buf, e)
            if ct < 0 or ct < running:  # not read, or lower than the last count
                break
            rest = rest_for(tpl, ct) + b"\r\n"
            if e + len(rest) != end or not startswith(rest, e):
                break
            text = buf[t:e]
            if text.strip(ascii_text) and not utf8_text(text):
                break
            step = ct - running
        else:
            text = buf[t:e]
            if text.strip(ascii_text) and not utf8_text(text):
                break
        pos = end
        if first is None:
            chunks += text != b""
            continue
        running = ct
        if text or step > 0:
            append(step)
    if pos > start:
        _after_run(state, first is not None, running, step, text != b"", chunks if first is None else len(tokens) - kept)
    return pos


def _after_run(state: StreamState, counted: bool, running: int, step: int, text: bool, chunks: int) -> None:
    """The state after the last event of a run of `chunks` content events (its text not empty: `text`)."""
    state.reasoning_event, state.run_chunks, state.run_counts = False, chunks, counted
    if counted:
        state.running_counts = True  # (already, but where the stream took its template before its first content)
        state._running_tokens = state.completion_tokens = running
        state._step = state.new_tokens = step
        state.content = text or step > 0
        return
    state.content, state.new_tokens = text, None if text else 0
    if chunks:
        state._uncounted = True


def learnt(state: StreamState, payload: bytes, obj: dict, path: tuple, key: bytes, text, usage) -> None:
    """After the full parse of an event with choices: a counted template stands only while the stream reads
    running counts (no finish, no chunk without counts); a plain content event (its text a string that needs no
    escape, no finish, no reasoning, the text not kept for `answer`, no `CHUNK_FIELD` of an engine) is learnt
    from, counted when it took the running count's branch. A template that cannot be proven leaves the one
    before in place."""
    tpl = state._template
    if tpl is not None and tpl[2] is not None and (state.finished or state._uncounted):
        state._template = state._framed = state._chunk = None
    if type(state.new_tokens) is int:
        state._step = state.new_tokens
    if type(text) is not str or not text or state.learns_left <= 0:
        _before_content(state, payload, obj)
        return
    if not text.isprintable() or '"' in text or "\\" in text:  # a newline, say: the next plain event will do
        return
    if state.answer is not None or state.finished or CHUNK_FIELD in obj:
        return
    if usage:
        if state._uncounted or type(usage) is not dict or type(usage.get("completion_tokens")) is not int:
            return
    else:
        usage = None
    state.learns_left -= 1
    tpl = sibling(payload, obj, text, usage)
    if tpl is None:
        template = learn(payload, obj, path, key, text, usage)
        if template is None:
            return
        tpl = tuple(template)
        remember_family(tpl, obj, state.new_tokens if type(state.new_tokens) is int else 0)
    _take(state, tpl)


def _before_content(state: StreamState, payload: bytes, obj: dict) -> None:
    """After the full parse of an event without content (a role event): a stream that has no template yet, and
    could learn one, takes its server's (`family_template`) with its own id and created, so that its content
    events, the first one too, are read without their JSON."""
    if state.content or state._template is not None or state.learns_left <= 0 or state.answer is not None \
            or state.finished or state._uncounted:
        return
    family = family_template(payload, obj)
    if family is not None:
        state.learns_left -= 1
        _take(state, family[0])
        state._step = family[1]  # a prediction: the first content event's count is read as written where it is not


def _take(state: StreamState, tpl: tuple) -> None:
    """The stream reads the template `tpl` (a plain tuple) from now on: as events, SSE events and chunks."""
    sse = sse_template(tpl)
    state._template, state._framed = tpl, sse
    state._chunk = (sse[0], sse[1] + b"\r\n", sse[2], sse[3], None if sse[2] is None else known_rests(sse), sse)
