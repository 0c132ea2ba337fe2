"""Differential fuzzing of the lean HTTP/1.1 client against h11: the same response bytes, cut at the same
random read boundaries, decoded by `loadgen.client.h1_connection.Connection` and by `h11.Connection`; both give
the same status, body and reusability, or both refuse.

Responses are generated whole (1xx first, status line, headers with obs-fold, Content-Length, chunked with
extensions and trailers, or close-delimited bodies), then perhaps broken by one named mutation. Where loadgen
is stricter than h11 on purpose (h1_parse's docstrings say where), `EXPECTED` says what loadgen does instead.
The unit tier runs a bounded number of examples; `benchmarks/fuzz_wire.py` runs the same properties longer. Minimised failures the fuzzer found are tests at the end of this file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import h11
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.test_h1_parse import Exchange, exchange, reads_of

pytestmark = pytest.mark.unit

# bounded in the unit tier; benchmarks/fuzz_wire.py sets WIRE_FUZZ_EXAMPLES for a longer run
BOUNDED = settings(max_examples=int(os.environ.get("WIRE_FUZZ_EXAMPLES", "300")), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

REFUSED = ("refused",)
# mutations loadgen refuses while h11 takes them (h1_parse.body_framing, parse_head)
OURS_STRICTER = {"cl-list", "cl-and-te", "version-2"}
TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-!#$%&'*+.^_`|~", min_size=1,
                max_size=8).map(str.encode)
VALUE = st.binary(max_size=16).map(lambda b: bytes(c for c in b if c > 32 and c != 127))  # no spaces/CTLs
MUTATIONS = ["none"] * 12 + [
    "cl-sign", "cl-hex", "cl-list", "cl-short", "cl-long", "cl-and-te", "te-gzip", "size-0x", "size-plus",
    "size-underscore", "size-space", "size-bws-ext", "size-short", "size-long", "space-colon", "status-2digit",
    "status-4digit", "version-2", "extra-bytes", "truncate", "nul-value", "101", "fold-first", "no-chunk-crlf",
]


@dataclass
class Wire:
    raw: bytes
    mutation: str
    body: bytes
    last_chunk_end: int = -1  # chunked: where the last chunk's size line ends in `raw`


@st.composite
def chunked_payload(draw, body: bytes, mutation: str) -> tuple[bytes, int]:
    """The chunked encoding of `body` (sizes in several spellings, extensions, a trailer); the offset where
    the last-chunk line ends."""
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=5))) if body else []
    out = b""
    for i, piece in enumerate(p for p in reads_of(body, cuts) if p):
        size = draw(st.sampled_from([b"%x", b"%X", b"%03x"])) % len(piece)
        ext = draw(st.sampled_from([b"", b";a=b", b';n="v;w"', b";x"]))
        first = i == 0
        size = {"size-0x": b"0x" + size, "size-plus": b"+" + size, "size-underscore": size[:1] + b"_" + size[1:],
                "size-space": b" " + size, "size-short": b"%x" % (len(piece) - 1) if len(piece) > 1 else b"g",
                "size-long": b"%x" % (len(piece) + 1)}.get(mutation, size) if first else size
        ext = b" ;x" if first and mutation == "size-bws-ext" else ext
        tail = b"xx" if first and mutation == "no-chunk-crlf" else b"\r\n"
        out += size + ext + b"\r\n" + piece + tail
    out += b"0\r\n"
    end = len(out)
    trailer = draw(st.lists(st.tuples(TOKEN, VALUE), max_size=2))
    return out + b"".join(b"X-T-" + n + b": " + v + b"\r\n" for n, v in trailer) + b"\r\n", end


def framing_fields(framing: str, body: bytes, mutation: str) -> list[tuple[bytes, bytes]]:
    """Content-Length or Transfer-Encoding of the body, as the mutation spells them."""
    if framing == "length":
        value = {"cl-sign": b"+%d", "cl-hex": b"0x%x", "cl-list": b"%d, %d", "cl-short": b"%d",
                 "cl-long": b"%d"}.get(mutation, b"%d")
        n = len(body) - 1 if mutation == "cl-short" and body else len(body) + 3 if mutation == "cl-long" else len(body)
        fields = [(b"Content-Length", value % ((n, n) if mutation == "cl-list" else n))]
        return fields + ([(b"Transfer-Encoding", b"chunked")] if mutation == "cl-and-te" else [])
    if framing == "chunked":
        te = b"gzip, chunked" if mutation == "te-gzip" else b"chunked"
        return [(b"Transfer-Encoding", te)] + ([(b"Content-Length", b"%d" % len(body))]
                                               if mutation == "cl-and-te" else [])
    return []


def applies(mutation: str, framing: str, body: bytes) -> bool:
    """Whether a mutation changes a response of this framing (a Content-Length mutation needs one...)."""
    if mutation.startswith("cl-") and mutation != "cl-and-te":
        return framing == "length" and (bool(body) or mutation != "cl-short")
    if mutation in ("cl-and-te", "te-gzip"):
        return framing == "chunked" or (framing == "length" and mutation == "cl-and-te")
    if mutation.startswith("size-") or mutation == "no-chunk-crlf":
        return framing == "chunked" and bool(body)
    return True


@st.composite
def wire_responses(draw) -> Wire:
    mutation = draw(st.sampled_from(MUTATIONS))
    infos = b"".join(b"HTTP/1.1 1%02d Info\r\nX-I: 1\r\n\r\n" % draw(st.sampled_from([0, 2, 3]))
                     for _ in range(draw(st.integers(0, 2))))
    if mutation == "101":
        infos += b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"
    version = b"HTTP/2.0" if mutation == "version-2" else draw(st.sampled_from([b"HTTP/1.1"] * 4 + [b"HTTP/1.0"]))
    status = draw(st.sampled_from([200, 200, 201, 204, 304, 404, 503]))
    code = {"status-2digit": b"%02d" % (status % 100), "status-4digit": b"%d0" % status}.get(mutation, b"%d" % status)
    reason = draw(st.sampled_from([b" OK", b" ", b"", b" Some Reason\t x", b" caf\xe9"]))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    body = draw(st.binary(max_size=120))
    mutation = mutation if applies(mutation, framing, body) else "none"
    fields = [(b"X-" + n, v) for n, v in draw(st.lists(st.tuples(TOKEN, VALUE), max_size=4))]
    fields += framing_fields(framing, body, mutation)
    if draw(st.booleans()):
        fields.append((b"Connection", draw(st.sampled_from([b"close", b"Close", b"upgrade, close", b"te"]))))
    if draw(st.booleans()):
        fields.insert(draw(st.integers(0, len(fields))), (b"X-Folded", b"one\r\n  two"))
    if mutation == "space-colon":
        fields.insert(0, (b"X-Space ", b"v"))
    if mutation == "nul-value":
        fields.insert(0, (b"X-Nul", b"a\x00b"))
    lines = b"".join(n + b": " + v + b"\r\n" for n, v in fields)
    if mutation == "fold-first":
        lines = b" X-Cont: 1\r\n" + lines
    head = infos + version + b" " + code + reason + b"\r\n" + lines + b"\r\n"
    last = -1
    if framing == "chunked":
        payload, end = draw(chunked_payload(body, mutation))
        last = len(head) + end
    else:
        payload = body
    raw = head + payload + (b"HTTP/1.1 200 OK\r\n\r\n" if mutation == "extra-bytes" else b"")
    if mutation == "truncate":
        raw = raw[:draw(st.integers(0, max(len(raw) - 1, 0)))]
    return Wire(raw, mutation, body, last)


# ---- the two decoders --------------------------------------------------------------------------------------
def ours(reads: list[bytes]) -> tuple:
    """("ok", status, body, reusable) or REFUSED, from loadgen's connection; the connection closes after the
    reads (a close-delimited body ends there, a truncated one fails there)."""
    ex: Exchange = exchange().feed(*reads)
    reusable = ex.reused
    ex.close()
    outcomes = ex.handler.outcomes
    if len(outcomes) != 1:
        raise AssertionError(f"told {outcomes}")
    if outcomes[0][0] == "fail":
        return REFUSED
    return "ok", ex.handler.status, bytes(ex.handler.body), reusable


def h11_client() -> h11.Connection:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "h"), ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    return conn


def theirs(reads: list[bytes]) -> tuple:
    """The same from h11 after a POST: reusable = both sides DONE with no bytes past the response once every
    read is in (judged before the close)."""
    conn, status, body, done, reusable = h11_client(), None, b"", False, False
    try:
        for data in [*reads, b""]:
            if data == b"":  # the close: what h11 thinks of the connection just before it
                reusable = done and conn.their_state is h11.DONE and not conn.trailing_data[0]
            conn.receive_data(data)
            while not done and (event := conn.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
                if isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    done = True  # what follows is only buffered: bytes past the response
    except h11.RemoteProtocolError:
        return REFUSED
    return ("ok", status, body, reusable) if done else REFUSED


def expected(wire: Wire, reads: list[bytes]) -> tuple:
    """What loadgen must say: h11's answer, except where loadgen is stricter or reads one case differently."""
    said = theirs(reads)
    if wire.mutation in OURS_STRICTER:
        return REFUSED
    if wire.mutation == "size-bws-ext":
        return None  # RFC 9112 7.1.1 allows BWS before ";": loadgen reads it, h11 refuses; judged in `check`
    return said


# ---- the properties ----------------------------------------------------------------------------------------
def check(wire: Wire, cuts: list[int]) -> None:
    reads = reads_of(wire.raw, cuts) if wire.raw else []
    want, got = expected(wire, reads), ours(reads)
    if want is None:  # BWS before a chunk extension: loadgen decodes the body
        assert got != REFUSED and (got[2] == wire.body or got[1] in (204, 304)), (wire, got)
        return
    if want == REFUSED and got != REFUSED and wire.mutation == "truncate" and len(wire.raw) >= wire.last_chunk_end > 0:
        # cut after the last chunk: only the trailer is missing, loadgen keeps the complete body (h11 refuses)
        assert got[2] == wire.body and not got[3], (wire, got)
        return
    assert got == want, (wire, reads)


@BOUNDED
@given(wire_responses(), st.data())
@example(Wire(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n", "size-0x", b"ok"), None)
@example(Wire(b"HTTP/1.1 204 No Content\r\n\r\n", "none", b""), None)
@example(Wire(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n", "extra-bytes", b"ok"), None)
def test_loadgen_and_h11_read_every_response_alike(wire, data):
    cuts = data.draw(st.lists(st.integers(0, len(wire.raw)), max_size=10)) if data is not None else []
    check(wire, cuts)


@BOUNDED
@given(wire_responses())
def test_one_byte_reads_read_alike(wire):
    check(wire, list(range(len(wire.raw))))


# ---- minimised failures: what the fuzzer found in the client before its framing was strict -----------------
FOUND = [
    # (mutation, bytes): loadgen read each of these otherwise than h11 (or than RFC 9112 where they differ)
    ("101", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\nHTTP/1.1 201\r\nContent-Length: 2\r\n\r\nok"),
    ("cl-and-te", b"HTTP/1.1 204 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
    ("cl-short", b"HTTP/1.1 201 \r\nContent-Length: 2\r\n\r\nokk"),  # was: the connection reused
    ("none", b"HTTP/1.0 201 \r\nX-Folded: one\r\n  two\r\nContent-Length: 1\r\n\r\nx"),  # was: refused
    ("extra-bytes", b"HTTP/1.1 204 OK\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),  # was: the next answer read as a body
    ("fold-first", b"HTTP/1.1 201 OK\r\n X-Cont: 1\r\n\r\n"),
    ("none", b"HTTP/1.1 304 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),  # was: body "abc"
    ("none", b"HTTP/1.1 304 OK\r\n\r\n"),  # was: read until the connection closed
    ("none", b"HTTP/1.1 200\r\nX-Folded: one\r\n  two\r\n\r\nuntil the end"),
    ("nul-value", b"HTTP/1.1 204 OK\r\nX-Nul: a\x00b\r\n\r\n"),
    ("size-0x", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x001;x\r\n|\r\n0\r\n\r\n"),
    ("size-plus", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n"),
    ("size-space", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2;a=b\r\nab\r\n0\r\n\r\n"),
    ("size-underscore", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0_03;x\r\nabc\r\n0\r\n\r\n"),
    ("space-colon", b"HTTP/1.1 200 OK\r\nX-Space : v\r\n\r\n"),
    ("status-2digit", b"HTTP/1.1 00 \r\nContent-Length: 0\r\n\r\n"),
    ("status-4digit", b"HTTP/1.1 3040 OK\r\n\r\n"),
    ("te-gzip", b"HTTP/1.1 200\r\nTransfer-Encoding: gzip, chunked\r\n\r\n6\r\ndata: \r\n0\r\n\r\n"),
]


@pytest.mark.parametrize("mutation, raw", FOUND, ids=[f"{i}-{m}" for i, (m, _) in enumerate(FOUND)])
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_what_the_fuzzer_found(mutation, raw, reads):
    check(Wire(raw, mutation, b""), [] if reads == "whole" else list(range(len(raw))))
