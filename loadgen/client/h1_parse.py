"""HTTP/1.1 response syntax for `loadgen.client.h1_connection`: pure functions over bytes, strict per RFC 9112.

The status line and header fields of a response head (and of a chunked body's trailer), how its body is
framed, chunk-size lines with extensions. Whatever could be read two ways is refused (`HttpFormatError`)
rather than guessed: a guess about framing decides where the next response starts. The grammar follows the
RFC and, where it leaves a choice, h11's (tests/test_h1_fuzz.py decodes the same bytes with both); where
loadgen is stricter than h11 the function says so.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_HEAD = 64 * 1024
MAX_FIELDS = 256  # header (or trailer) lines of one response
MAX_SIZE_LINE = 1024
MAX_SIZE_DIGITS = 16  # 2**64 - 1 bytes: a larger chunk size is a bug or an attack, not a body
MAX_LENGTH_DIGITS = 20  # Content-Length digits (h11's limit)
HEX_DIGITS = b"0123456789abcdefABCDEF"
MAX_KNOWN_SIZES = 4096  # distinct size lines remembered (`CHUNK_SIZES`)
MAX_KNOWN_HEADS = 256  # distinct heads remembered (`KNOWN_HEADS`)
MAX_KNOWN_HEAD = 1024  # bytes of a head remembered: 256 of them stay well under 1 MiB
NO_BODY = (204, 304)  # with 1xx and answers to HEAD: the body ends at the head's blank line (RFC 9112 6.3)

# RFC 9112 4: HTTP-version SP 3DIGIT SP reason; an absent reason (with its space) is accepted as h11 does, and
# the reason's characters are h11's (anything but NUL, CR, LF, VT, FF)
STATUS_LINE = re.compile(rb"HTTP/1\.([0-9]) ([0-9]{3})(?: [^\x00\r\n\x0b\x0c]*)?")
# RFC 9112 5: token ":" OWS value OWS; no space before the colon (a smuggling vector), no NUL, CR or LF inside
FIELD_LINE = re.compile(rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*")
FOLD = re.compile(rb"[ \t]+")


class HttpFormatError(ValueError):
    """The peer sent something that is not HTTP/1.1."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head (without the final blank line); repeated headers
    are joined with ", "; an HTTP/1.0 answer without `Connection: keep-alive` gets `connection: close`.
    Stricter than h11: only HTTP/1.x, and only CRLF line ends (a bare LF or CR is an error)."""
    lines = head.split(b"\r\n")
    m = STATUS_LINE.fullmatch(lines[0])
    if m is None:
        raise HttpFormatError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers = parse_fields(lines[1:])
    if m.group(1) == b"0" and "keep-alive" not in tokens(headers.get("connection", "")):
        headers["connection"] = "close"
    return int(m.group(2)), headers


def parse_fields(lines: list[bytes]) -> dict[str, str]:
    """Lower-cased field names to values (repeats joined with ", "), from the lines of a head or a trailer.
    A line that starts with a space or tab continues the one before (obs-fold: joined with one space, as RFC
    9112 5.2 asks of a user agent). A line that is not `name: value` is an error: skipped, it could hide the
    body's framing."""
    if len(lines) > MAX_FIELDS:
        raise HttpFormatError(f"more than {MAX_FIELDS} header lines")
    fields: dict[str, str] = {}
    for line in unfold(lines):
        m = FIELD_LINE.fullmatch(line)
        if m is None:
            raise HttpFormatError(f"malformed header line {line[:80]!r}")
        key, value = m.group(1).decode("ascii").lower(), m.group(2).decode("latin-1")
        fields[key] = fields[key] + ", " + value if key in fields else value
    return fields


def unfold(lines: list[bytes]) -> list[bytes]:
    """Field lines with obs-fold continuations joined to the line before; a continuation first is an error."""
    out: list[bytes] = []
    for line in lines:
        m = FOLD.match(line)
        if m is None:
            out.append(line)
        elif not out:
            raise HttpFormatError(f"malformed header line {line[:80]!r} (a continuation with nothing before it)")
        else:
            out[-1] += b" " + line[m.end():]
    return out


def tokens(value: str) -> list[str]:
    """The lower-cased items of a comma-separated header value (`Connection`, `Transfer-Encoding`)."""
    return [t for t in (part.strip().lower() for part in value.split(",")) if t]


def body_framing(headers: dict[str, str], status: int = 200) -> tuple[str, int, bool]:
    """(mode, content length, keep-alive) of a response body: mode "chunked", "length" (Content-Length
    bytes) or "close" (the body ends with the connection, which cannot be reused). A 204 or 304 has no body
    whatever its headers say. Refused: a Transfer-Encoding other than exactly `chunked` (loadgen asks for no
    coding), both Transfer-Encoding and Content-Length (RFC 9112 6.3: "ought to be handled as an error"; h11
    lets chunked win), a Content-Length that is not digits, or lists several values (h11 takes "5, 5")."""
    keep_alive = "close" not in tokens(headers.get("connection", ""))
    te, cl = headers.get("transfer-encoding"), headers.get("content-length")
    if te is not None and tokens(te) != ["chunked"]:
        raise HttpFormatError(f"unsupported Transfer-Encoding {te[:40]!r} (only chunked is read)")
    if te is not None and cl is not None:
        raise HttpFormatError("both Transfer-Encoding and Content-Length: the body could be read two ways")
    if cl is not None and not (cl.isascii() and cl.isdigit() and len(cl) <= MAX_LENGTH_DIGITS):
        raise HttpFormatError(f"bad Content-Length {cl[:40]!r}")  # int() would take "-5", "+5", "1_0"
    if status in NO_BODY:
        return "length", 0, keep_alive
    if te is not None:
        return "chunked", 0, keep_alive
    if cl is not None:
        return "length", int(cl), keep_alive
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


class Head(NamedTuple):
    """What a response head says: its status and lower-cased headers (`parse_head`); for a final answer its
    body's framing (`body_framing`: mode, content length, and keep-alive, here also false when
    `keep_alive_limits` says this answer may be the last) and the server's idle limit in seconds (None: not
    given). An interim (1xx) answer's framing is not read: mode "", 0, True, None."""
    status: int
    headers: dict[str, str]
    mode: str
    body_left: int
    keep_alive: bool
    idle_s: float | None


def derive_head(head: bytes) -> Head:
    """The `Head` of a response head (without the final blank line), read afresh. A 101 is an error: loadgen
    asks for no upgrade."""
    status, headers = parse_head(head)
    if 100 <= status < 200:
        if status == 101:
            raise HttpFormatError("101 Switching Protocols, to a request that asked for no upgrade")
        return Head(status, headers, "", 0, True, None)
    mode, body_left, keep_alive = body_framing(headers, status)
    idle_s, more = keep_alive_limits(headers)
    return Head(status, headers, mode, body_left, keep_alive and more, idle_s)


KNOWN_HEADS: dict[bytes, Head] = {}
"""Heads already read by `derive_head`, to their `Head`: a server sends the same head bytes over and over, and
a dict lookup costs a fraction of the regex work. Only heads that `derive_head` accepted are in it (a malformed
one raises every time), up to `MAX_KNOWN_HEADS` of at most `MAX_KNOWN_HEAD` bytes. Its `Head`s are never handed
out: `read_head` gives each caller its own headers dict."""


def read_head(head: bytes) -> Head:
    """`derive_head(head)`, from `KNOWN_HEADS` when the same bytes were read before; the headers dict is the
    caller's own (a copy), whatever it does with it."""
    known = KNOWN_HEADS.get(head)
    if known is None:
        known = remember_head(head)
    status, headers, mode, body_left, keep_alive, idle_s = known
    return Head(status, headers.copy(), mode, body_left, keep_alive, idle_s)


def remember_head(head: bytes) -> Head:
    """`derive_head(head)`, kept in `KNOWN_HEADS` when the head is short."""
    known = derive_head(head)
    if len(head) <= MAX_KNOWN_HEAD:
        if len(KNOWN_HEADS) >= MAX_KNOWN_HEADS:
            KNOWN_HEADS.clear()  # not closed to new heads when full: a `Date:` line makes a new head every second
        KNOWN_HEADS[head] = known
    return known


def chunk_size(line: bytes) -> int:
    """Size of a chunk-size line `HEXDIG+ [BWS ";" ext]* OWS` (RFC 9112 7.1; trailing whitespace as h11
    allows it), ≥ 0. Only hex digits: Python's `int(…, 16)` alone would take "0x10", "+10", "1_0", " 10".
    Extensions are skipped, their text is not read; a NUL in them is an error. Stricter than h11 in one way
    and looser in one: more than 16 digits is refused, a space before ";" (BWS) is accepted."""
    size, _, ext = line.partition(b";")
    size = size.rstrip(b" \t")
    if not size or size.lstrip(HEX_DIGITS) or b"\x00" in ext:
        raise HttpFormatError(f"bad chunk size line {line[:40]!r}")
    if len(size.lstrip(b"0")) > MAX_SIZE_DIGITS:
        raise HttpFormatError(f"chunk size too large {line[:40]!r}")
    return int(size, 16)


def head_end(buf: bytes, start: int = 0) -> int:
    """Where the head in `buf` ends (its blank line's CRLF CRLF begins), the search from `start`; -1 while it has
    not ended. A head larger than `MAX_HEAD`, or one with bare LF line ends, is an error."""
    end = buf.find(b"\r\n\r\n", start)
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise HttpFormatError("response head larger than 64 KiB")
        if buf.find(b"\n\n", start) >= 0:
            raise HttpFormatError("response head with bare LF line ends")
    return end


def trailer_end(buf: bytes) -> int:
    """Where the trailer section at the start of `buf` ends, after its blank line (its field lines checked, not
    kept); -1 while it has not ended. A section larger than `MAX_HEAD` is an error."""
    if buf.startswith(b"\r\n"):
        return 2
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise HttpFormatError("trailer section larger than 64 KiB")
        return -1
    parse_fields(buf[:end].split(b"\r\n"))
    return end + 4


def size_line_start(part: bytes) -> bytes:
    """`part`, the start of a chunk-size line that the next read goes on with (held until then); too long to be
    one is an error."""
    if len(part) > MAX_SIZE_LINE:
        raise HttpFormatError("chunk size line too long")
    return part


MAX_HELD_CHUNK = 1 << 16  # a longer chunk that a read ends inside goes to its reader in parts


def holdable(data: bytes, pos: int, size: int) -> bool:
    """The chunk of `size` bytes whose data starts at `data[pos]`, which the read ends inside, may wait for the next
    read and go to its reader whole: it is short, and no line ends in the part here (so no SSE event or line of it
    could have been read before the rest arrives: holding it changes no time and nothing a reader keeps)."""
    return size <= MAX_HELD_CHUNK and data.find(b"\n", pos) < 0 and data.find(b"\r", pos) < 0


def chunk_rest(data: bytes, left: int, pieces: list[bytes]) -> tuple[int, int]:
    """The rest of a chunk begun in an earlier read, `left` bytes with its CRLF: its data goes to `pieces`;
    returns (where it ends in `data`, the bytes of it still left after `data`, or -1 when it ended there)."""
    crlf = data[max(left - 2, 0):left]  # what this read holds of the CRLF after the chunk's data
    if crlf and not b"\r\n"[max(2 - left, 0):].startswith(crlf):
        raise HttpFormatError("chunk data not followed by CRLF")  # before its data goes anywhere
    if left > 2:
        pieces.append(data[:left - 2])
    if left > len(data):
        return len(data), left - len(data)
    return left, -1


CHUNK_SIZES: dict[bytes, int] = {}
"""Size lines already read by `chunk_size`, to their size: a stream's chunks repeat a few sizes, and one dict
lookup costs less than the hex-digits check and `int()`. Only lines that `chunk_size` accepted are in it, up to
`MAX_KNOWN_SIZES` of at most `MAX_SIZE_DIGITS` bytes; `remember_chunk_size` reads the others."""


def remember_chunk_size(line: bytes) -> int:
    """`chunk_size(line)`, kept in `CHUNK_SIZES` when there is room and the line is short."""
    size = chunk_size(line)
    if len(line) <= MAX_SIZE_DIGITS and len(CHUNK_SIZES) < MAX_KNOWN_SIZES:
        CHUNK_SIZES[line] = size
    return size
