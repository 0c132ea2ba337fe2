"""HTTP/1.1 response syntax for `loadgen.client.h1_connection`: pure functions over bytes.

The status line and headers of a response head, how its body is framed, chunk-size lines with extensions.
"""

from __future__ import annotations

MAX_HEAD = 64 * 1024
MAX_SIZE_LINE = 1024


class HttpFormatError(ValueError):
    """The peer sent something that is not HTTP/1.1."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head (without the final blank line); repeated headers
    are joined with ", "; an HTTP/1.0 answer without `Connection: keep-alive` gets `connection: close`.
    A header line without a name and a colon is an error: skipped, it could hide the body's framing."""
    cut = head.find(b"\r\n")
    parts = (head if cut < 0 else head[:cut]).split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise HttpFormatError(f"not an HTTP/1.x status line: {head[:80]!r}")
    headers: dict[str, str] = {}
    if cut >= 0:
        for line in head[cut + 2:].decode("latin-1").split("\r\n"):
            name, sep, value = line.partition(":")
            key, value = name.strip().lower(), value.strip()
            if not (sep and key):
                raise HttpFormatError(f"malformed header line {line[:80]!r}")
            headers[key] = headers[key] + ", " + value if key in headers else value
    if parts[0] == b"HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers.setdefault("connection", "close")
    return int(parts[1]), headers


def body_framing(headers: dict[str, str]) -> tuple[str, int, bool]:
    """(mode, content length, keep-alive) of a response body: mode "chunked", "length" (Content-Length
    bytes) or "close" (the body ends with the connection, which cannot be reused)."""
    keep_alive = "close" not in headers.get("connection", "").lower()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked", 0, keep_alive
    if "content-length" in headers:
        value = headers["content-length"]
        if not (value.isascii() and value.isdigit()):  # int() would take "-5", "+5", "1_0": a body never done
            raise HttpFormatError(f"bad Content-Length {value!r}")
        return "length", int(value), keep_alive
    return "close", 0, False


def keep_alive_limits(headers: dict[str, str]) -> tuple[float | None, bool]:
    """(idle seconds the server keeps the connection, whether another request may follow) from a
    `Keep-Alive: timeout=T, max=N` header: (T or None, N is absent or N > 1). N counts the requests the
    server still accepts on the connection (Apache counts down, others repeat their limit); at N ≤ 1 this
    answer may be the last, so the connection is not reused."""
    value = headers.get("keep-alive")
    if not value:
        return None, True
    params: dict[str, float] = {}  # a parameter given twice: the last one counts
    for part in value.split(","):
        name, _, number = part.strip().partition("=")
        try:
            params[name.lower()] = float(number)
        except ValueError:
            continue
    left = params.get("max")
    return params.get("timeout"), left is None or left > 1


def chunk_size(line: bytes) -> int:
    """Size of a chunk-size line with extensions (`1a;name=value`); ≥ 0."""
    try:
        size = int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise HttpFormatError(f"bad chunk size line {line[:40]!r}") from None
    if size < 0:
        raise HttpFormatError(f"negative chunk size {line[:40]!r}")
    return size
