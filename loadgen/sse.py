"""Server-sent events framing over raw bytes, incremental.

We split bytes ourselves rather than iterating lines through the HTTP library: a single SSE line can be
longer than a read buffer (aiohttp raises on long lines), and one TCP read often holds several events or a
fraction of one. The parser accepts LF, CRLF and CR line endings, comment lines (keep-alives), multi-line
`data:` fields, and events split anywhere across reads. It yields the `data` payload of each event as bytes.
"""

from __future__ import annotations


class SseParser:
    """Feed bytes as they arrive; get back the complete events' data payloads."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # A CR at the very end may be the first half of a CRLF split across reads: keep it back.
            carry = buf.endswith(b"\r")
            if carry:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if carry:
                buf += b"\r"
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._buf = buf
            return []
        self._buf = buf[cut + 1:]
        events: list[bytes] = []
        data = self._data
        for line in buf[:cut].split(b"\n"):
            if not line:
                if data:
                    events.append(b"\n".join(data))
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            # comment lines (":" keep-alives) and other fields (event, id, retry) carry nothing we use
        self._data = data
        return events

    def pending(self) -> bytes:
        """Bytes of an unfinished event (for error snippets when a stream is cut)."""
        return b"\n".join(self._data) + self._buf
