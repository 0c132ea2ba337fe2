"""The remembered response heads of `loadgen/client/h1_parse.py` (`read_head`, `KNOWN_HEADS`): the same bytes
read a second time give what `parse_head`, `body_framing` and `keep_alive_limits` give them, a malformed head
is refused every time, the cache stays bounded, and no caller can change what the next caller gets."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from loadgen.client.h1_parse import (
    KNOWN_HEADS,
    MAX_KNOWN_HEAD,
    MAX_KNOWN_HEADS,
    HttpFormatError,
    body_framing,
    keep_alive_limits,
    parse_head,
    read_head,
)
from tests.test_h1_parse import CASES, MALFORMED, exchange, responses

pytestmark = pytest.mark.unit

UVICORN = (b"HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nserver: uvicorn\r\n"
           b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked")


def head_of(data: bytes) -> bytes:
    return data[:data.index(b"\r\n\r\n")]


HEADS = sorted({head_of(case[0]) for case in CASES.values()} | {UVICORN} | {
    b"HTTP/1.1 200 OK", b"HTTP/1.1 204", b"HTTP/1.0 200 OK", b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive",
    b"HTTP/1.1 200 OK\r\nX-A:1\r\nx-a:  2 \r\nX-B: v:w\r\nContent-Length: 0", b"HTTP/1.1 200 OK\r\nServer: caf\xe9",
    b"HTTP/1.1 304 Not Modified\r\nContent-Length: 12", b"HTTP/1.1 103 Early Hints\r\nLink: </a>",
    b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=abc, max=7\r\nContent-Length: 1",
    b"HTTP/1.1 200 OK\r\nX-Fold: a\r\n  b\r\nContent-Length: 1",
})


def uncached(head: bytes) -> tuple:
    """What `Connection._head` derived from a head before heads were remembered."""
    status, headers = parse_head(head)
    if 100 <= status < 200:
        if status == 101:
            raise HttpFormatError("101 Switching Protocols, to a request that asked for no upgrade")
        return status, headers, "", 0, True, None
    mode, body_left, keep_alive = body_framing(headers, status)
    idle_s, more = keep_alive_limits(headers)
    return status, headers, mode, body_left, keep_alive and more, idle_s


def refused(head: bytes) -> bool:
    try:
        uncached(head)
    except HttpFormatError:
        return True
    return False


# the heads of MALFORMED that are refused (in the others the body is), and a few more
BAD_HEADS = sorted({h for h in (head_of(data) for data, _ in MALFORMED.values() if b"\r\n\r\n" in data)
                    if refused(h)} | {
    b"", b"HTTP/2 200 OK", b"HTTP/1.1 200 OK\r\nContent-Length: -5", b"HTTP/1.1 101\r\nUpgrade: h2c",
    b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b",
})


def refusal(head: bytes) -> str:
    with pytest.raises(HttpFormatError) as caught:
        read_head(head)
    return str(caught.value)


@pytest.fixture(autouse=True)
def forget_heads():
    KNOWN_HEADS.clear()
    yield
    KNOWN_HEADS.clear()


@pytest.mark.parametrize("head", HEADS)
def test_a_head_read_again_gives_what_the_uncached_functions_give(head):
    expected = uncached(head)
    assert read_head(head) == expected and head in KNOWN_HEADS
    assert read_head(bytes(bytearray(head))) == expected  # equal bytes, another object: from KNOWN_HEADS
    assert read_head(head) == expected and len(KNOWN_HEADS) == 1


@pytest.mark.parametrize("head", [h for h in HEADS if b"\r\n" in h])
def test_what_a_head_gives_is_independent_of_the_heads_read_before(head):
    for other in HEADS:
        read_head(other)
    assert read_head(head) == uncached(head)


@pytest.mark.parametrize("head", BAD_HEADS)
def test_a_malformed_head_is_refused_every_time_and_never_kept(head):
    with pytest.raises(HttpFormatError) as caught:
        uncached(head)
    assert [refusal(head) for _ in range(3)] == [str(caught.value)] * 3
    assert not KNOWN_HEADS


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(responses())
def test_generated_heads_read_twice_give_what_the_uncached_functions_give(response):
    head = head_of(response[0])
    assert read_head(head) == read_head(head) == uncached(head)
    assert read_head(head).headers == response[3]


def test_known_heads_stay_bounded():
    for second in range(3 * MAX_KNOWN_HEADS + 7):
        head = UVICORN.replace(b"00:00:00", b"%08d" % second)
        assert read_head(head) == uncached(head)
        assert len(KNOWN_HEADS) <= MAX_KNOWN_HEADS and head in KNOWN_HEADS
    long_head = UVICORN + b"\r\nx-filler: " + b"y" * MAX_KNOWN_HEAD
    assert read_head(long_head) == uncached(long_head) and long_head not in KNOWN_HEADS


def test_a_caller_changing_its_headers_changes_nothing_for_the_next_caller():
    head = b"HTTP/1.0 200 OK\r\nContent-Length: 2"
    first = read_head(head)
    assert first.headers == {"content-length": "2", "connection": "close"} and not first.keep_alive
    first.headers["content-length"] = "999"
    first.headers.pop("connection")
    first.headers["x-added"] = "1"
    assert read_head(head) == uncached(head) == first._replace(headers={"content-length": "2",
                                                                        "connection": "close"})


def test_a_handler_changing_its_headers_changes_nothing_for_the_next_response():
    data = CASES["Keep-Alive timeout and max"][0]
    first = exchange()
    first.handler.head = lambda status, headers, now_ns: (headers.clear(), first.handler.read)[1]
    first.feed(data)
    assert first.handler.outcomes == [("end",)] and first.reused
    second = exchange().feed(data)
    assert second.result() == (200, {"keep-alive": "timeout=5, max=100", "content-length": "2"}, b"ok",
                               [("end",)], True, 4.0)


@pytest.mark.parametrize("reads", ["whole", "1-byte"])
def test_an_interim_head_is_kept_and_its_answer_still_read(reads):
    data = CASES["100 Continue first"][0]
    for _ in range(2):
        ex = exchange().feed(*([data] if reads == "whole" else [data[i:i + 1] for i in range(len(data))]))
        assert ex.result() == (200, {"content-length": "2"}, b"ok", [("end",)], True, ex.pool.reuse_idle_s)
    assert b"HTTP/1.1 100 Continue" in KNOWN_HEADS and head_of(data[25:]) in KNOWN_HEADS  # both, by the connection

