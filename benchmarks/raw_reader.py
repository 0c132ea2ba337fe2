"""The physical limit of a streaming client in Python: the least work that still reads every event.

asyncio streams, one keep-alive connection per slot, HTTP/1.1 chunked decoding and SSE framing by hand,
one timestamp per read, a chunk count and the gaps between content chunks; JSON is parsed only for the
final usage chunk. No error handling beyond "this is not a 200 chunked stream". loadgen's client does
strictly more (it parses every event, counts tokens per chunk, handles every error as a record), so the
ratio loadgen/raw is its overhead over the floor.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

import orjson


@dataclass(slots=True)
class RawResult:
    t_sent_ns: int = 0
    t_first_token_ns: int | None = None
    t_end_ns: int = 0
    chunks: int = 0
    completion_tokens: int | None = None
    gaps_ns: list[int] = field(default_factory=list)


def request_bytes(url: str, path: str, body: dict, headers: dict | None = None) -> bytes:
    host = urlparse(url).netloc
    payload = orjson.dumps(body)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()).encode()
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: */*\r\n%s"
            b"Content-Length: %d\r\n\r\n%s" % (path.encode(), host.encode(), extra, len(payload), payload))


class RawConnection:
    """One keep-alive connection; `stream()` sends a prepared request and reads its SSE answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str) -> "RawConnection":
        u = urlparse(url)
        reader, writer = await asyncio.open_connection(u.hostname, u.port, limit=2**20)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    async def stream(self, request: bytes) -> RawResult:
        res = RawResult()
        reader = self.reader
        res.t_sent_ns = time.monotonic_ns()
        self.writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
            raise ConnectionError(f"not a 200 chunked stream: {head[:80]!r}")
        framed = b""  # chunked-encoded bytes not yet decoded
        sse = b""  # decoded bytes not yet a complete event
        last = 0
        gaps = res.gaps_ns
        while True:
            data = await reader.read(2**18)
            now = time.monotonic_ns()
            if not data:
                raise ConnectionError("connection closed mid-stream")
            framed = framed + data if framed else data
            pos, parts, ended = 0, [], False
            while True:
                nl = framed.find(b"\r\n", pos)
                if nl < 0:
                    break
                size = int(framed[pos:nl], 16)
                end = nl + 2 + size
                if len(framed) < end + 2:
                    break
                if size == 0:
                    ended = True
                    pos = end + 2
                    break
                parts.append(framed[nl + 2:end])
                pos = end + 2
            framed = framed[pos:]
            if parts:
                events = (sse + b"".join(parts)).split(b"\n\n")
                sse = events.pop()
                for ev in events:
                    if b'"choices":[]' in ev:
                        if b'"usage"' in ev:
                            res.completion_tokens = orjson.loads(ev[6:])["usage"]["completion_tokens"]
                    elif ev == b"data: [DONE]" or b'"role"' in ev:
                        continue
                    else:
                        res.chunks += 1
                        if last:
                            gaps.append(now - last)
                        else:
                            res.t_first_token_ns = now
                        last = now
            if ended:
                res.t_end_ns = now
                return res
