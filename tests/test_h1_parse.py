"""The lean HTTP/1.1 client's own parser (`loadgen/client/h1_parse.py`) and connection protocol
(`loadgen/client/h1_connection.py`), without a socket: the protocol's callbacks are driven directly with the
bytes of each read, and the handler records what it was told.

Tables for the syntax (status line, headers, Content-Length and chunked bodies with extensions and trailers,
`Connection: close`, `Keep-Alive: timeout=…, max=…`, SSE bodies); properties for the framing: any split of a
valid response into reads gives the same response, and malformed or truncated input ends the request with an
error at the read that shows it (the connection never waits for bytes that cannot make it valid)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadgen.client.h1_connection import CLOSE, CONTINUE, DONE, MAX_DRAIN, Connection
from loadgen.client.h1_parse import (
    MAX_HEAD,
    HttpFormatError,
    body_framing,
    chunk_size,
    keep_alive_limits,
    parse_head,
)
from loadgen.client.sse import SseParser

pytestmark = pytest.mark.unit

REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n\r\n"
POOL_IDLE_S = 30.0


# ---- a connection without a socket ------------------------------------------------------------------------
class Pool:
    reuse_idle_s = POOL_IDLE_S

    def __init__(self):
        self.put, self.forgotten = [], []

    def _put(self, conn):
        self.put.append(conn)

    def _forget(self, conn):
        self.forgotten.append(conn)


class Transport:
    def __init__(self):
        self.written, self.aborted = b"", False

    def write(self, data):
        self.written += data

    def abort(self):
        self.aborted = True

    def is_closing(self):
        return self.aborted

    def get_extra_info(self, name):
        return None


@dataclass
class Handler:
    """Records what the connection tells a request; `answer` is what its body reader returns once it has read
    `answer_after` bytes."""
    answer: int = CONTINUE
    answer_after: int = 0
    status: int | None = None
    headers: dict | None = None
    body: bytearray = field(default_factory=bytearray)
    outcomes: list = field(default_factory=list)  # ("end",) or ("fail", kind, message)

    def head(self, status, headers, now_ns):
        self.status, self.headers = status, headers
        return self.read

    def read(self, data, now_ns):
        self.body += data
        return self.answer if len(self.body) >= self.answer_after else CONTINUE

    def end(self, now_ns):
        self.outcomes.append(("end",))

    def fail(self, kind, message, now_ns):
        self.outcomes.append(("fail", kind, message))


@dataclass
class Exchange:
    conn: Connection
    pool: Pool
    transport: Transport
    handler: Handler

    def feed(self, *reads: bytes) -> Exchange:
        for data in reads:
            self.conn.data_received(data)
        return self

    def close(self) -> Exchange:
        self.conn.connection_lost(None)
        return self

    @property
    def dropped(self) -> bool:
        """The connection was aborted by the client or lost."""
        return self.transport.aborted or self.conn.lost

    @property
    def reused(self) -> bool:
        """The connection went back to the pool (and was not dropped)."""
        return self.conn in self.pool.put and not self.dropped

    def result(self):
        """What the request was told, and what became of the connection."""
        return (self.handler.status, self.handler.headers, bytes(self.handler.body), self.handler.outcomes,
                self.reused, self.conn.reuse_idle_s)


def exchange(handler: Handler | None = None) -> Exchange:
    pool, transport, handler = Pool(), Transport(), handler or Handler()
    conn = Connection(pool)
    conn.connection_made(transport)
    conn.start(REQUEST, handler)
    assert transport.written == REQUEST
    return Exchange(conn, pool, transport, handler)


def reads_of(data: bytes, cuts) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


def one_byte_reads(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def failed(ex: Exchange) -> tuple[str, str]:
    """The one failure the request was told of, with the connection dropped."""
    assert len(ex.handler.outcomes) == 1 and ex.handler.outcomes[0][0] == "fail", ex.handler.outcomes
    assert ex.dropped and not ex.reused
    return ex.handler.outcomes[0][1], ex.handler.outcomes[0][2]


# ---- the head: pure functions ---------------------------------------------------------------------------
@pytest.mark.parametrize("head, status, headers", [
    (b"HTTP/1.1 200 OK", 200, {}),
    (b"HTTP/1.1 204", 204, {}),  # the reason phrase may be empty or absent
    (b"HTTP/1.1 503 Service Unavailable", 503, {}),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 12",
     200, {"content-type": "text/event-stream", "content-length": "12"}),
    (b"HTTP/1.1 200 OK\r\nX-A:1\r\nx-a:  2 \r\nX-B: v:w", 200, {"x-a": "1, 2", "x-b": "v:w"}),  # repeated: joined
    (b"HTTP/1.1 200 OK\r\nX-Empty:", 200, {"x-empty": ""}),
    (b"HTTP/1.0 200 OK", 200, {"connection": "close"}),  # 1.0 closes unless it says keep-alive
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive", 200, {"connection": "Keep-Alive"}),
    (b"HTTP/1.1 200 OK\r\nServer: caf\xe9", 200, {"server": "caf\u00e9"}),  # latin-1, never a decode error
])
def test_parse_head(head, status, headers):
    assert parse_head(head) == (status, headers)


@pytest.mark.parametrize("head", [
    b"", b"HTTP/1.1", b"HTTP/2 200 OK", b"HTTP/1.1 OK", b"HTTP/1.1 2x0 OK", b"http/1.1 200 OK", b"ICY 200 OK",
    b"<html><body>hello</body></html>", b"SSH-2.0-OpenSSH_9.6",
])
def test_a_malformed_status_line_is_a_format_error(head):
    with pytest.raises(HttpFormatError, match="not an HTTP/1.x status line"):
        parse_head(head + b"\r\nContent-Length: 0")


@pytest.mark.parametrize("line", [b"Content-Length 5", b"no colon here", b": no name", b"Content-Length : 5",
                                  b"Bad Name: 1", b"X-Nul: a\x00b", b"X-Bare-CR: a\rb", b"X-Bare-LF: a\nb"])
def test_a_malformed_header_line_is_a_format_error(line):
    with pytest.raises(HttpFormatError, match="malformed header line"):
        parse_head(b"HTTP/1.1 200 OK\r\nX-Fine: 1\r\n" + line)


@pytest.mark.parametrize("headers, framing", [
    ({"content-length": "12"}, ("length", 12, True)),
    ({"content-length": "0"}, ("length", 0, True)),
    ({"content-length": "12", "connection": "close"}, ("length", 12, False)),
    ({"content-length": "12", "connection": "Keep-Alive"}, ("length", 12, True)),
    ({"transfer-encoding": "chunked"}, ("chunked", 0, True)),
    ({"transfer-encoding": "Chunked"}, ("chunked", 0, True)),
    ({"transfer-encoding": "chunked", "connection": "close"}, ("chunked", 0, False)),
    ({}, ("close", 0, False)),  # neither: the body ends with the connection
    ({"connection": "keep-alive"}, ("close", 0, False)),
    ({"connection": "closed-captions"}, ("close", 0, False)),  # a token, not a substring: still no framing
    ({"content-length": "2", "connection": "closed-captions"}, ("length", 2, True)),
])
def test_body_framing(headers, framing):
    assert body_framing(headers) == framing


@pytest.mark.parametrize("status", [204, 304])
@pytest.mark.parametrize("headers", [{}, {"content-length": "12"}, {"transfer-encoding": "chunked"}])
def test_a_204_or_304_has_no_body_whatever_its_headers_say(status, headers):
    assert body_framing(headers, status) == ("length", 0, True)


@pytest.mark.parametrize("headers, says", [
    ({"transfer-encoding": "chunked", "content-length": "3"}, "both Transfer-Encoding and Content-Length"),
    ({"transfer-encoding": "gzip, chunked"}, "unsupported Transfer-Encoding"),
    ({"transfer-encoding": "chunked, chunked"}, "unsupported Transfer-Encoding"),  # two headers, joined
    ({"transfer-encoding": "identity"}, "unsupported Transfer-Encoding"),
    ({"content-length": "1" * 21}, "bad Content-Length"),
])
def test_framing_that_could_be_read_two_ways_is_refused(headers, says):
    with pytest.raises(HttpFormatError, match=says):
        body_framing(headers)


@pytest.mark.parametrize("value", ["", "twelve", "1 2", "12, 12", "-5", "0x10"])
def test_a_bad_content_length_is_a_format_error(value):
    with pytest.raises(HttpFormatError, match="bad Content-Length"):
        body_framing({"content-length": value})


@pytest.mark.parametrize("value, limits", [
    (None, (None, True)),
    ("timeout=5", (5.0, True)),
    ("timeout=5, max=100", (5.0, True)),
    ("max=100, timeout=2.5", (2.5, True)),
    ("Timeout=5,Max=2", (5.0, True)),
    ("timeout=5, max=1", (5.0, False)),  # this answer may be the server's last on the connection
    ("max=0", (None, False)),
    ("timeout=abc, max=7", (None, True)),  # an unreadable number is left out, not an error
    ("foo, timeout=3", (3.0, True)),
])
def test_keep_alive_limits(value, limits):
    assert keep_alive_limits({} if value is None else {"keep-alive": value}) == limits


@pytest.mark.parametrize("line, size", [
    (b"0", 0), (b"1a", 26), (b"1A", 26), (b"ff", 255), (b"000010", 16), (b"1a;name=value", 26),
    (b"1a;name=\"quoted;value\";other", 26), (b"5 ;ext", 5), (b"10; a=b", 16),
])
def test_chunk_size(line, size):
    assert chunk_size(line) == size


@pytest.mark.parametrize("line", [b"", b"zz", b"1g", b";ext", b"-5", b"-1;x", b"\xff",
                                  b"0x10", b"0X10", b"+10", b"1_0", b" 10", b"\t10", b"10\x00", b"1 0", b"1;a\x00"])
def test_a_bad_chunk_size_is_a_format_error(line):
    with pytest.raises(HttpFormatError, match="chunk size"):
        chunk_size(line)


# ---- whole responses through the connection: tables --------------------------------------------------------
SSE_EVENTS = [b'{"choices":[{"delta":{"content":"Hel"}}]}', b'{"choices":[{"delta":{"content":"lo"}}]}',
              b"[DONE]"]
SSE_BODY = b"".join(b"data: " + e + b"\n\n" for e in SSE_EVENTS)


def chunked(*chunks: bytes, last: bytes = b"0\r\n\r\n") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + last


CASES = {
    # name: (response bytes, close after them, status, body, reused, reuse_idle_s)
    "length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False, 200, b"hello", True, POOL_IDLE_S),
    "empty length": (b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", False, 204, b"", True, POOL_IDLE_S),
    "error answer": (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 17\r\n\r\n{\"error\":\"busy\"}\n",
                     False, 503, b'{"error":"busy"}\n', True, POOL_IDLE_S),
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b"hel", b"lo, ", b"world"),
                False, 200, b"hello, world", True, POOL_IDLE_S),
    "chunk extensions": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"3;name=value\r\nhel\r\n2;a=b;c\r\nlo\r\n0;last=yes\r\n\r\n",
                         False, 200, b"hello", True, POOL_IDLE_S),
    "trailers": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 + chunked(b"hello", last=b"0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"),
                 False, 200, b"hello", True, POOL_IDLE_S),
    "CRLF in a chunk": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b"a\r\n\r\nb", b"\r\n"),
                        False, 200, b"a\r\n\r\nb\r\n", True, POOL_IDLE_S),
    "Connection: close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                          False, 200, b"ok", False, POOL_IDLE_S),
    "chunked, Connection: close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   + chunked(b"ok"), False, 200, b"ok", False, POOL_IDLE_S),
    "close-delimited": (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", True, 200,
                        b"until the end", False, POOL_IDLE_S),
    "HTTP/1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False, 200, b"ok", False, POOL_IDLE_S),
    "HTTP/1.0 keep-alive": (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", False,
                            200, b"ok", True, POOL_IDLE_S),
    "Keep-Alive timeout and max": (b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 2\r\n\r\n"
                                   b"ok", False, 200, b"ok", True, 4.0),  # 0.8 of the server's 5 s
    "Keep-Alive timeout above the pool's": (b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=600\r\nContent-Length: 2\r\n"
                                            b"\r\nok", False, 200, b"ok", True, POOL_IDLE_S),
    "Keep-Alive max=1": (b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=1\r\nContent-Length: 2\r\n\r\nok", False,
                         200, b"ok", False, 4.0),
    "100 Continue first": (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False,
                           200, b"ok", True, POOL_IDLE_S),
    "SSE chunked": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + chunked(SSE_BODY[:30], SSE_BODY[30:31], SSE_BODY[31:]), False, 200, SSE_BODY, True,
                    POOL_IDLE_S),
    "SSE until close": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + SSE_BODY,
                        True, 200, SSE_BODY, False, POOL_IDLE_S),
}


def run_case(data: bytes, close: bool, reads: list[bytes]) -> Exchange:
    ex = exchange().feed(*reads)
    return ex.close() if close else ex


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_responses(name, reads):
    data, close, status, body, reused, reuse_idle_s = CASES[name]
    ex = run_case(data, close, [data] if reads == "whole" else one_byte_reads(data))
    assert (ex.handler.status, bytes(ex.handler.body), ex.handler.outcomes) == (status, body, [("end",)])
    assert (ex.reused, ex.conn.reuse_idle_s, ex.dropped) == (reused, reuse_idle_s, not reused)
    assert ex.conn.served == (0 if close else 1)  # a body that ends with the connection leaves none to count


def test_headers_reach_the_handler_lower_cased_and_joined():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nSet-Cookie: a=1\r\n"
                         b"set-cookie: b=2\r\nContent-Length: 0\r\n\r\n")
    assert ex.handler.headers == {"content-type": "text/event-stream", "set-cookie": "a=1, b=2",
                                  "content-length": "0"}


def test_sse_events_are_the_same_whatever_the_reads():
    data = CASES["SSE chunked"][0]
    for reads in ([data], one_byte_reads(data), reads_of(data, range(0, len(data), 7))):
        ex = exchange()
        parser, events = SseParser(), []

        def read(chunk, now_ns, parser=parser, events=events):
            events.extend(parser.feed(chunk))
            return CONTINUE

        ex.handler.head = lambda status, headers, now_ns, read=read: read
        ex.feed(*reads)
        assert events == SSE_EVENTS and ex.handler.outcomes == [("end",)] and ex.reused


def test_a_reader_that_is_done_drains_the_rest_and_the_connection_is_reused():
    data = CASES["chunked"][0]
    ex = exchange(Handler(answer=DONE, answer_after=1)).feed(*one_byte_reads(data))
    assert ex.handler.outcomes == [("end",)]  # told once, at its DONE
    assert bytes(ex.handler.body) == b"h" and ex.reused


def test_a_reader_that_says_close_drops_the_connection():
    ex = exchange(Handler(answer=CLOSE, answer_after=1)).feed(CASES["length"][0])
    assert ex.handler.outcomes == [("end",)] and ex.transport.aborted and not ex.reused


def test_a_body_that_goes_on_after_done_is_cut():
    body = b"x" * (MAX_DRAIN + 10)
    ex = exchange(Handler(answer=DONE, answer_after=1)).feed(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                                                            % len(body), body[:1], body[1:])
    assert ex.handler.outcomes == [("end",)] and ex.transport.aborted and not ex.reused


def test_bytes_nobody_asked_for_drop_the_connection():
    ex = exchange().feed(CASES["length"][0])
    assert ex.reused
    ex.feed(b"HTTP/1.1 200 OK\r\n")  # the server talks out of turn
    assert ex.transport.aborted and ex.handler.outcomes == [("end",)]


def test_pipelined_bytes_after_a_chunked_body_stop_reuse():
    ex = exchange().feed(CASES["chunked"][0] + b"HTTP/1.1 200 OK\r\n")
    assert ex.handler.outcomes == [("end",)] and bytes(ex.handler.body) == b"hello, world" and not ex.reused


def test_a_connection_closed_after_the_last_chunk_completes_the_body():
    data = CASES["trailers"][0]
    ex = exchange().feed(data[:data.index(b"X-Checksum")]).close()  # the trailer never came
    assert ex.handler.outcomes == [("end",)] and bytes(ex.handler.body) == b"hello"


def test_a_request_on_a_lost_connection_fails_at_once():
    ex = exchange().feed(CASES["length"][0]).close()
    handler = Handler()
    ex.conn.start(REQUEST, handler)
    assert handler.outcomes == [("fail", "connection_error",
                                 "server closed the connection (before the request was sent)")]


# ---- malformed and truncated responses: tables ------------------------------------------------------------
MALFORMED = {
    # name: (bytes, the start of the error message)
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x status line"),
    "no status code": (b"HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n", "not an HTTP/1.x status line"),
    "HTML instead of a head": (b"<html>\r\n\r\n</html>", "not an HTTP/1.x status line"),
    "header without a colon": (b"HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\nok", "malformed header line"),
    "bad Content-Length": (b"HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok", "bad Content-Length"),
    "negative Content-Length": (b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok", "bad Content-Length"),
    "bad chunk size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
                       "bad chunk size line"),
    "bad chunk size with an extension": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                         b"2\r\nok\r\nq;x=1\r\nok\r\n0\r\n\r\n", "bad chunk size line"),
    "negative chunk size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n",
                            "bad chunk size line"),
    "empty chunk size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nok\r\n0\r\n\r\n",
                         "bad chunk size line"),
    "chunk size 0x10": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
                        "bad chunk size line"),
    "chunk size +2": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n",
                      "bad chunk size line"),
    "chunk size 1_0": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n" + b"x" * 16
                       + b"\r\n0\r\n\r\n", "bad chunk size line"),
    "chunk data longer than its size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n"
                                        b"0\r\n\r\n", "chunk data not followed by CRLF"),
    "chunk data shorter than its size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\r\n"
                                         b"0\r\n\r\n", "chunk data not followed by CRLF"),
    "Content-Length and chunked": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"2\r\nok\r\n0\r\n\r\n", "both Transfer-Encoding and Content-Length"),
    "gzip, chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                      "unsupported Transfer-Encoding"),
    "two Content-Lengths": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
                            "bad Content-Length"),
    "space before the colon": (b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", "malformed header line"),
    "continuation first": (b"HTTP/1.1 200 OK\r\n X-A: 1\r\nContent-Length: 2\r\n\r\nok", "malformed header line"),
    "bad trailer": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nno colon\r\n\r\n",
                    "malformed header line"),
    "101 unasked": (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\nHTTP/1.1 200 OK\r\n"
                    b"Content-Length: 0\r\n\r\n", "101 Switching Protocols"),
    "status of four digits": (b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "not an HTTP/1.x status line"),
    "HTTP/1.x": (b"HTTP/1.x 200 OK\r\nContent-Length: 0\r\n\r\n", "not an HTTP/1.x status line"),
    "bare LF head": (b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", "response head with bare LF line ends"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_malformed_responses_fail_with_a_protocol_error(name, reads):
    data, message = MALFORMED[name]
    ex = exchange().feed(*([data] if reads == "whole" else one_byte_reads(data)))
    kind, said = failed(ex)
    assert kind == "protocol_error" and said.startswith(message), said


def test_a_head_without_an_end_fails_past_64_kib():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\n", *[b"X-Filler: " + b"y" * 1000 + b"\r\n"] * (MAX_HEAD // 1000))
    assert failed(ex) == ("protocol_error", "response head larger than 64 KiB")


def test_more_than_256_header_lines_fail():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 257 + b"Content-Length: 0\r\n\r\n")
    assert failed(ex) == ("protocol_error", "more than 256 header lines")


def test_a_trailer_without_an_end_fails_past_64_kib():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n",
                         *[b"X-Filler: " + b"y" * 1000 + b"\r\n"] * (MAX_HEAD // 1000))
    assert failed(ex) == ("protocol_error", "trailer section larger than 64 KiB")


def test_an_obs_fold_continues_the_header_before():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\nX-A: one\r\n  two\r\n\tthree\r\nContent-Length: 2\r\n\r\nok")
    assert ex.handler.headers == {"x-a": "one two three", "content-length": "2"} and ex.reused


# ---- the three looseness cases of issue 31, now refused or closed ---------------------------------------------
@pytest.mark.parametrize("size", [b"0x2", b"+2", b"0_2", b" 2"])
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_a_chunk_size_that_python_int_takes_but_is_not_hex_fails(size, reads):
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nok\r\n0\r\n\r\n"
    kind, message = failed(exchange().feed(*([data] if reads == "whole" else one_byte_reads(data))))
    assert (kind, message.split(" ", 4)[:4]) == ("protocol_error", ["bad", "chunk", "size", "line"])


@pytest.mark.parametrize("status", [204, 304])
@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_a_204_or_304_without_content_length_ends_at_its_head(status, reads):
    data = b"HTTP/1.1 %d Nothing\r\nX-A: 1\r\n\r\n" % status
    ex = exchange().feed(*([data] if reads == "whole" else one_byte_reads(data)))  # no close: it need not wait
    assert (ex.handler.status, bytes(ex.handler.body), ex.handler.outcomes, ex.reused) == (status, b"", [("end",)],
                                                                                           True)


@pytest.mark.parametrize("extra", [b"x", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
def test_bytes_after_a_content_length_body_in_the_same_read_close_the_connection(extra):
    ex = exchange().feed(CASES["length"][0] + extra)
    assert (bytes(ex.handler.body), ex.handler.outcomes) == (b"hello", [("end",)])
    assert ex.dropped and not ex.reused


def test_bytes_after_an_empty_body_in_the_same_read_close_the_connection():
    ex = exchange().feed(b"HTTP/1.1 204 No Content\r\n\r\nhello")
    assert ex.handler.outcomes == [("end",)] and ex.dropped and not ex.reused


def test_a_chunk_size_line_without_an_end_fails():
    ex = exchange().feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"1" * 2000)
    assert failed(ex) == ("protocol_error", "chunk size line too long")


@pytest.mark.parametrize("name, cut, where", [
    ("length", 10, "before the response head"),
    ("length", -2, "mid-body"),
    ("chunked", -10, "mid-body"),  # inside a chunk
    ("chunked", -5, "mid-body"),  # after the data of the last chunk with data
    ("chunked", -4, "mid-body"),  # inside the last chunk's size line
])
def test_a_truncated_response_fails_when_the_connection_closes(name, cut, where):
    data = CASES[name][0]
    kind, message = failed(exchange().feed(data[:cut]).close())
    assert (kind, message) == ("connection_error", f"server closed the connection ({where})")


# ---- properties over generated responses ----------------------------------------------------------------
TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=10)
VALUE = st.text("abcdefghijklmnopqrstuvwxyz0123456789 ;=,/:\"", max_size=20).map(str.strip)
BODY = st.binary(max_size=300)


@st.composite
def responses(draw):
    """(bytes, close after them, status, headers as the handler sees them, body, connection reused)."""
    status = draw(st.integers(200, 599))
    framing = draw(st.sampled_from(["length", "none"] if status in (204, 304) else ["length", "chunked", "close"]))
    body = b"" if status in (204, 304) else draw(BODY)
    fields = [("X-" + name, value) for name, value in draw(st.lists(st.tuples(TOKEN, VALUE), max_size=5))]
    closing = framing == "close" or draw(st.booleans())
    max_left = draw(st.none() | st.integers(0, 5))
    if closing:
        fields.append(("Connection", "close"))
    if max_left is not None:
        fields.append(("Keep-Alive", f"timeout=5, max={max_left}"))
    if framing == "length":
        fields.append(("Content-Length", str(len(body))))
        payload = body
    elif framing == "chunked":
        fields.append(("Transfer-Encoding", "chunked"))
        cuts = sorted(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=6))) if body else []
        pieces = [p for p in reads_of(body, cuts) if p]
        lines = []
        for piece in pieces:
            ext = draw(st.sampled_from([b"", b";a=b", b";name=\"v;w\"", b" ;x"]))
            size = draw(st.sampled_from([b"%x", b"%X", b"%04x"])) % len(piece)
            lines.append(size + ext + b"\r\n" + piece + b"\r\n")
        trailers = b"".join(b"X-T%d: %s\r\n" % (i, v.encode()) for i, v in
                            enumerate(draw(st.lists(VALUE, max_size=2))))
        payload = b"".join(lines) + b"0\r\n" + trailers + b"\r\n"
    else:  # close-delimited, or a 204/304 without framing headers (its body ends at the head)
        payload = body
    head = f"HTTP/1.1 {status} Reason\r\n" + "".join(f"{n}: {v}\r\n" for n, v in fields) + "\r\n"
    seen: dict[str, str] = {}
    for name, value in fields:
        key = name.lower()
        seen[key] = seen[key] + ", " + value if key in seen else value
    reused = not closing and (max_left is None or max_left > 1)
    return head.encode() + payload, framing == "close", status, seen, body, reused


def cut_points(data: bytes):
    return st.lists(st.integers(0, len(data)), max_size=12)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.data())
def test_any_split_of_a_valid_response_reads_the_same(response, data):
    raw, close, status, headers, body, reused = response
    whole = run_case(raw, close, [raw]).result()
    assert whole[:5] == (status, headers, body, [("end",)], reused)
    for reads in (reads_of(raw, data.draw(cut_points(raw))), one_byte_reads(raw)):
        assert run_case(raw, close, reads).result() == whole


@settings(deadline=None)
@given(responses(), st.data())
def test_a_truncated_response_is_never_a_complete_one(response, data):
    raw, close, status, headers, body, reused = response
    cut = data.draw(st.integers(0, len(raw) - 1))
    ex = run_case(raw, False, reads_of(raw[:cut], data.draw(cut_points(raw[:cut])))).close()
    assert len(ex.handler.outcomes) == 1 and not ex.reused
    if ex.handler.outcomes[0][0] == "end":
        # only where the body's end is the connection's, or where every byte of the body had arrived (a chunked
        # body whose last chunk was read: its trailer section is all that is missing)
        assert close or bytes(ex.handler.body) == body
    else:
        assert ex.handler.outcomes[0][1] == "connection_error"
        assert body.startswith(bytes(ex.handler.body))  # what it was given is a prefix of the body


STATUS_GARBAGE = st.binary(min_size=1, max_size=30).filter(lambda b: b"\r\n" not in b and not b.startswith(b"HTTP/1."))


@settings(deadline=None)
@given(STATUS_GARBAGE, st.data())
def test_a_malformed_status_line_fails_whatever_the_reads(line, data):
    raw = line + b"\r\nContent-Length: 2\r\n\r\nok"
    ex = exchange().feed(*reads_of(raw, data.draw(cut_points(raw))))
    assert failed(ex)[0] == "protocol_error"


BAD_SIZE = st.text("ghijklmnopqrstuvwxyz!#$%&*-./:<>?@[]^_`{|}~", min_size=1, max_size=8).map(str.encode)


@settings(deadline=None)
@given(BAD_SIZE, st.data())
def test_a_bad_chunk_size_fails_whatever_the_reads(size, data):
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n" + size + b"\r\nxx\r\n0\r\n\r\n"
    ex = exchange().feed(*reads_of(raw, data.draw(cut_points(raw))))
    kind, message = failed(ex)
    assert kind == "protocol_error" and "chunk size" in message, message
    assert b"ok".startswith(bytes(ex.handler.body))  # the chunk before it, whole or in part, and nothing after


@settings(deadline=None)
@given(TOKEN, st.data())
def test_a_header_line_without_a_colon_fails_whatever_the_reads(name, data):
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + name.encode() + b" value\r\n\r\nok"
    ex = exchange().feed(*reads_of(raw, data.draw(cut_points(raw))))
    kind, message = failed(ex)
    assert kind == "protocol_error" and message.startswith("malformed header line"), message
