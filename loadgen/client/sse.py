"""Server-sent events framing over raw bytes, incremental.

We split bytes ourselves rather than iterating lines through the HTTP library: a single SSE line can be
longer than a read buffer (aiohttp raises on long lines), and one TCP read often holds several events or a
fraction of one. The parser accepts LF, CRLF and CR line endings, comment lines (keep-alives), multi-line
`data:` fields, a leading UTF-8 BOM, and events split anywhere across reads. It yields the `data` payload of
each event as bytes, as the WHATWG event-stream algorithm dispatches them (tests/test_sse_spec.py holds that
algorithm and compares the two on generated streams).
"""

from __future__ import annotations

BOM = b"\xef\xbb\xbf"  # the standard drops one U+FEFF at the start of the stream


class SseParser:
    """Feed bytes as they arrive; get back the complete events' data payloads."""

    __slots__ = ("_buf", "_data", "_skip_lf", "_start")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._skip_lf = False
        self._start = True  # no byte of the stream read yet: it may begin with a BOM

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._start:
            head = self._buf + chunk
            if len(head) < 3 and BOM.startswith(head):  # perhaps a BOM split across reads: wait for the rest
                self._buf = head
                return []
            self._start, self._buf = False, b""
            chunk = head[3:] if head.startswith(BOM) else head
        if self._skip_lf or chunk.find(b"\r") >= 0:  # not `in`: bytes' `in` raises and clears a TypeError first
            chunk = self._lf_only(chunk)
        buf = self._buf + chunk if self._buf else chunk
        if not self._data:
            events = self._whole_events(buf)
            if events is not None:
                return events
        # one split, no copy of the buffer; the last piece is the unfinished line (b"" after a line break)
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        return self._lines(lines)

    @property
    def idle(self) -> bool:
        """Nothing is held from earlier reads (no unfinished line or event, no CR, no BOM to look for): the next
        read's first byte begins a new event's line."""
        return not (self._buf or self._data or self._skip_lf or self._start)

    def _whole_events(self, buf: bytes) -> list[bytes] | None:
        """The events of `buf` in one split when it is a run of one-line `data: ` events, each ended by a
        blank line (what servers send), then the start of the next; else None, `buf` untouched. Called with no
        data held from earlier lines.

        The shape is checked over the bytes, not line by line: split at each `\\n\\ndata: `, every LF before
        the last piece must be one of those (no event of two lines, no blank line of its own, no comment),
        and in the last piece the first LF must begin the event's blank line (what follows is the next event's
        start, whole lines included)."""
        if not buf.startswith(b"data: "):
            return None
        if buf.endswith(b"\n\n"):  # the read ends where an event does, as servers write them
            events = buf[6:-2].split(b"\n\ndata: ")
            if buf.count(b"\n") == 2 * len(events):
                self._buf = b""
                return events
        events = buf.split(b"\n\ndata: ")
        last = events[-1]
        head = len(buf) - len(last)  # where the last piece starts
        if buf.count(b"\n", 0, head) != 2 * (len(events) - 1):
            return None
        end = last.rfind(b"\n\n")
        if end >= 0:  # the last piece holds an event and its blank line
            if last.find(b"\n") != end:
                return None
            events[-1], rest = last[:end], last[end + 2:]
        elif len(events) > 1:  # the next event began with `data: `: the split took its prefix
            events.pop()
            rest = buf[head - 6:]
        else:
            return None
        events[0] = events[0][6:]
        if b"\n" in rest:  # whole lines of the next event already: its data is held for the next read
            lines = rest.split(b"\n")
            self._buf = lines.pop()
            events += self._lines(lines)
        else:
            self._buf = rest
        return events

    def _lines(self, lines: list[bytes]) -> list[bytes]:
        """The events that whole `lines` end, by the standard's steps; the data of one they leave open is held."""
        events: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data = []
            elif line.startswith(b"data: "):
                data.append(line[6:])
            elif line.startswith(b"data:"):
                data.append(line[5:])
            elif line == b"data":  # a field without a colon has an empty value
                data.append(b"")
            # comment lines (":" keep-alives) and other fields (event, id, retry) carry nothing we use
        self._data = data
        return events

    def _lf_only(self, chunk: bytes) -> bytes:
        """`chunk` with each CRLF and CR as LF."""
        # A CR ends a line at once, even at the end of a read (holding it back would hold back the last event
        # of a CR-only stream forever); an LF right after it, in the next read, is the rest of a CRLF.
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
            self._skip_lf = False
        if chunk:
            self._skip_lf = chunk.endswith(b"\r")
            if b"\r" in chunk:
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return chunk
