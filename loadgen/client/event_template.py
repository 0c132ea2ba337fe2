"""A stream's event template: the bytes of its plain content events around what changes from one to the next,
learned from one event that the full parse read, so that later events of that exact shape are read without
parsing their JSON (docs/performance.md, *The event template*).

A plain content event of an OpenAI stream is `HEAD TEXT REST`: the head ends with the opening quote of the
text's JSON string, and the rest (from its closing quote) is the same from one event to the next but for the
running usage numbers (`completion_tokens`, and `total_tokens` where the server sends it, which stays
`completion_tokens` + a constant). `rest_for(template, ct)` is the rest of the event whose count is `ct`; an event
is of the template when it is `head + text + rest_for(template, ct)` byte for byte and its text is a JSON string
that means exactly its UTF-8 bytes (`plain_text`: no quote, no backslash, no control character, valid UTF-8). The
reader (`loadgen.client.template_reader`) tries the count it predicts (the last count plus the last step), then
the count written in the event (`read_count`); anything else is declined and read by the full parse, which alone
decides what an event means.

Why that is the full parse's answer: the learnt event is exactly what orjson writes for its own parse (compact,
keys in order, texts as raw UTF-8, integers in decimal), and the same object with another text and other counts
at their places is written as the template writes them (`_proven`). So an event of the template is what orjson
writes for the learnt object with that event's text and counts, and reading it gives that object back. A template
that cannot be proven so (an event written otherwise, the text or a count also written elsewhere than where it is
read, a duplicate key) is not kept.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

MAX_COUNT = 10**18  # counts below this are read exactly by the full parse (orjson reads ints beyond 64 bits as floats)
# bytes a plain text may hold: printable ASCII but the quote and the backslash, and DEL; then UTF-8's other bytes
ASCII_TEXT = bytes(c for c in range(0x20, 0x80) if c not in b'"\\')
TEXT_BYTES = ASCII_TEXT + bytes(range(0x80, 0x100))


class Template(NamedTuple):
    """The fixed pieces of one stream's plain content events.

    `rest` is the bytes after the text (uncounted: as they are; counted: a `%` format of the numbers, which are
    the count plus `first`, and plus `second` where there are two; `second` None when there is one). `mid` is the
    rest up to the first number and `after` the bytes that follow it: `read_count` finds the number between
    them. The state keeps templates as plain tuples (a tuple unpacks faster than a named one)."""

    head: bytes
    rest: bytes
    first: int | None  # None: uncounted
    second: int | None
    mid: bytes = b""
    after: bytes = b""


def rest_for(tpl: tuple, ct: int) -> bytes:
    """The bytes after the text of the event of template `tpl` (a `Template` or its plain tuple) whose running
    count is `ct` (uncounted: `rest`)."""
    _, rest, first, second, _, _ = tpl
    if first is None:
        return rest
    if second is None:
        return rest % (ct + first)
    return rest % (ct + first, ct + second)


KNOWN_RESTS: dict[tuple, dict[int, bytes] | tuple] = {}
"""The chunk-framed rests of counted templates by count (`rest_for` and a CRLF), for rests that more than one
stream has learnt: a cell's streams share their template's rest (the prompt's length is in it), so each count's
rest is formatted once a cell instead of once an event. A rest only one stream has learnt is noted by that stream's
template itself (an `id` could be a later template's once this one is gone): streams whose prompts all differ fill
no cache. Bounded: `MAX_KNOWN_TEMPLATES` rests (emptied when full), `MAX_KNOWN_COUNTS` counts each."""
MAX_KNOWN_TEMPLATES, MAX_KNOWN_COUNTS = 16, 4096


def known_rests(tpl: tuple) -> dict[int, bytes] | None:
    """The cache of the counted template `tpl`'s rests by count (a stream's template, as a tuple), or None while
    only this stream has learnt its rest."""
    key = tpl[1:4]  # the rest's format and the counts' offsets
    rests = KNOWN_RESTS.get(key)
    if isinstance(rests, dict):
        return rests
    if rests is None:
        if len(KNOWN_RESTS) >= MAX_KNOWN_TEMPLATES:
            KNOWN_RESTS.clear()
        KNOWN_RESTS[key] = tpl
        return None
    if rests is tpl:
        return None
    cache: dict[int, bytes] = {}
    KNOWN_RESTS[key] = cache
    return cache


FAMILIES: list[tuple[bytes, bytes, bytes, tuple, int]] = []
"""Templates that streams learnt, newest first, each as the bytes of its head around the values of the event's
`id` (a string) and `created` (an integer), the template (a plain tuple) and the tokens the event it was learnt from
added (a stream's first content event, most often: what a later stream's first one is predicted to add): a cell's
streams differ in those two values only, so a later stream's first plain event is read as one of them with its own
values (`sibling`, `family_template`) instead of being learnt again. Bounded: `MAX_FAMILIES`."""
MAX_FAMILIES = 16


def sibling(payload: bytes, obj: dict, text: str, usage: dict | None) -> tuple | None:
    """The template (a plain tuple) of `payload`, a plain content event whose parse is `obj` (its text `text`,
    its usage `usage` when counted, as `learn` takes them), when the event is byte for byte one of `FAMILIES`'
    templates with this event's `id`, `created`, text and count; else None.

    Why it needs no proof of its own: the family's template was proven (`learn`), and this event is what that
    template writes with other values of two fields of the head, each written as itself (the event equals the
    template's bytes with the values' UTF-8 and digits put in, and its parse gave those values). orjson writes
    each value of an object on its own, so the new head stands before the same text and rest."""
    ident, created = obj.get("id"), obj.get("created")
    if type(ident) is not str or type(created) is not int or not FAMILIES:
        return None
    values, written = ident.encode(), b"%d" % created
    tail = text.encode()
    for i, (before, between, after, tpl, _) in enumerate(FAMILIES):
        if (tpl[2] is None) != (usage is None) or not payload.startswith(before):
            continue
        head = before + values + between + written + after
        if payload == head + tail + rest_for(tpl, usage["completion_tokens"] if usage else 0):
            if orjson.dumps(obj) != payload:  # (it is, by the above: cheap)
                return None
            if i:  # the newest family is the one a stream takes before its first content (`family_template`)
                FAMILIES.insert(0, FAMILIES.pop(i))
            return (head, *tpl[1:])
    return None


def family_template(payload: bytes, obj: dict) -> tuple[tuple, int] | None:
    """The template (a plain tuple) that the newest of `FAMILIES` has with the `id` and `created` of `obj`, the
    parse of `payload`, and the tokens its first content event is predicted to add: `payload` is an event of a
    stream before its first content (a role event), whose content events then need no parse of their own to be
    read by the template; None where the family cannot be taken so.

    Why it needs no proof of its own, as `sibling`: an event of the template so made is the family's template
    with this stream's values of the two fields of the head put in, each written as orjson writes it (`created` an
    integer, `id` a string orjson writes as its UTF-8 bytes, `plain_text`), so it is what orjson writes for the
    family's object with those values, this event's text and count. An event not of it is read by the full parse,
    which learns the stream's own template as before."""
    ident, created = obj.get("id"), obj.get("created")
    if type(ident) is not str or type(created) is not int or not FAMILIES:
        return None
    before, between, after, tpl, step = FAMILIES[0]
    values = ident.encode()
    if not payload.startswith(before) or not plain_text(values):  # (what orjson writes as it is: no orjson call)
        return None
    return (before + values + between + b"%d" % created + after, *tpl[1:]), step


def remember_family(tpl: tuple, obj: dict, step: int = 0) -> None:
    """Keep `tpl`, learnt from the event whose parse is `obj` and which added `step` tokens, among `FAMILIES` when
    its head holds the event's `id` and then its `created` as written (`"id":"…"`, `"created":…`)."""
    ident, created = obj.get("id"), obj.get("created")
    if type(ident) is not str or type(created) is not int:
        return
    head, values, written = tpl[0], ident.encode(), b"%d" % created
    at = head.find(b'"id":"%s"' % values) + 6
    to = head.find(b'"created":%s' % written, at + len(values)) + 10
    if at < 6 or to < 10:
        return
    family = (head[:at], head[at + len(values):to], head[to + len(written):], tpl)
    if not any(known[:4] == family for known in FAMILIES):
        FAMILIES.insert(0, (*family, step))
        del FAMILIES[MAX_FAMILIES:]


def sse_template(tpl: tuple) -> tuple:
    """The template `tpl` (a plain tuple) of the same events as SSE writes them: `data: <event>` and a blank line."""
    return (b"data: " + tpl[0], tpl[1] + b"\n\n", *tpl[2:])


def plain_text(text: bytes) -> bool:
    """`text` is a JSON string's content without escapes that means exactly its UTF-8 decoding."""
    return not text.strip(ASCII_TEXT) or utf8_text(text)


def utf8_text(text: bytes) -> bool:
    """`text`, not all printable ASCII, is a JSON string's content without escapes, valid UTF-8."""
    if text.strip(TEXT_BYTES):
        return False
    try:
        text.decode()
    except UnicodeDecodeError:
        return False
    return True


def read_count(tpl: tuple, buf: bytes, e: int) -> int:
    """The running count of the event of `tpl` whose text's closing quote is at `buf[e]`, as written: what is
    between `mid` and `after`, read as an integer; then the event's rest must be `rest_for(count)` exactly (which
    also rules out a sign, spaces, leading zeros). -1 when it cannot be read so."""
    _, _, first, _, mid, after = tpl
    if not buf.startswith(mid, e):
        return -1
    s = e + len(mid)
    c = buf.find(after, s)
    if c < 0 or c - s > 18:
        return -1
    try:
        ct = int(buf[s:c]) - first
    except ValueError:
        return -1
    return ct if 0 <= ct < MAX_COUNT and buf.startswith(rest_for(tpl, ct), e) else -1


def learn(payload: bytes, obj: dict, text_path: tuple, key: bytes, text: str, usage: dict | None) -> Template | None:
    """The template of `payload`, a plain content event whose parse is `obj`, or None where it cannot be proven.

    `text_path` is where the text is in `obj` (`("choices", 0, "delta", "content")`), `key` its key as it is
    written (`b'"content":'`), `text` its value; `usage` (`obj["usage"]`) is given when the event carries the
    running `completion_tokens` (a counted template), else None. `obj` is left as it was."""
    try:
        if orjson.dumps(obj) != payload:  # written as orjson writes its parse: the layout follows from the object
            return None
    except orjson.JSONEncodeError:
        return None
    quoted = orjson.dumps(text)
    at = payload.find(key + quoted)
    if at < 0 or b"\\" in quoted:
        return None
    h = at + len(key) + 1
    head, rest = payload[:h], payload[h + len(quoted) - 2:]
    if usage is None:
        tpl = Template(head, rest, None, None)
        return tpl if _proven(tpl, obj, text_path, None, ()) else None
    ct = usage["completion_tokens"]
    counted = _number(rest, "completion_tokens", ct)
    if counted is None:
        return None
    total = _number(rest, "total_tokens", usage.get("total_tokens"))
    slots = sorted([counted, total]) if total else [counted]
    fmt, at = b"", 0
    for start, end, _, _ in slots:
        fmt += rest[at:start].replace(b"%", b"%%") + b"%d"
        at = end
    fmt += rest[at:].replace(b"%", b"%%")
    (a, b, first, _), *more = slots
    after = rest[b:more[0][0]] if more else rest[b:]
    tpl = Template(head, fmt, first - ct, more[0][2] - ct if more else None, rest[:a], after)
    return tpl if _proven(tpl, obj, text_path, usage, [name for _, _, _, name in slots]) else None


def _number(rest: bytes, name: str, value) -> tuple[int, int, int, str] | None:
    """(start, end, value, name) of the digits of usage's `name` in `rest`, or None."""
    if type(value) is not int or not 0 <= value < MAX_COUNT:
        return None
    digits = b"%d" % value
    at = rest.find(b'"%s":%s' % (name.encode(), digits))
    if at < 0:
        return None
    end = at + len(name) + 3 + len(digits)
    return end - len(digits), end, value, name


def _proven(tpl: Template, obj: dict, text_path: tuple, usage: dict | None, counts) -> bool:
    """`obj` (which orjson writes as the learnt event) with another text and the counts one more is written as
    the template writes that text and count: the text and the counts are where the template has them."""
    parent, key = _at(obj, text_path[:-1]), text_path[-1]
    text = parent[key]
    probe = "q" if text == "p" else "p"
    ct = usage["completion_tokens"] if usage else 0
    parent[key] = probe
    for name in counts:
        usage[name] += 1  # type: ignore[index]
    try:
        return bool(orjson.dumps(obj) == tpl.head + probe.encode() + rest_for(tpl, ct + 1))
    finally:
        parent[key] = text
        for name in counts:
            usage[name] -= 1  # type: ignore[index]


def _at(obj, path: tuple):
    for k in path:
        obj = obj[k]
    return obj
