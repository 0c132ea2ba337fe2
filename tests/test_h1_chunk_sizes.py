"""The remembered chunk-size lines (`h1_parse.CHUNK_SIZES`): a lookup gives what `chunk_size` gives, only lines it
accepted are remembered, and the dict stays bounded; a connection reads the same sizes with it full or empty."""

from __future__ import annotations

import pytest

from loadgen.client import h1_parse
from loadgen.client.h1_parse import CHUNK_SIZES, HttpFormatError, chunk_size, remember_chunk_size

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def empty_sizes():
    saved = dict(CHUNK_SIZES)
    CHUNK_SIZES.clear()
    yield
    CHUNK_SIZES.clear()
    CHUNK_SIZES.update(saved)


@pytest.mark.parametrize("line", [b"0", b"a", b"15A", b"00ff", b"1;ext=1", b"10 ", b"ffffffffffffffff"])
def test_a_remembered_size_is_the_size_read(line):
    assert remember_chunk_size(line) == chunk_size(line)
    assert CHUNK_SIZES[line] == chunk_size(line)


@pytest.mark.parametrize("line", [b"0x10", b"+10", b"1_0", b" 10", b"-1", b"", b"g", b"1;\x00"])
def test_a_line_chunk_size_refuses_is_never_remembered(line):
    with pytest.raises(HttpFormatError):
        remember_chunk_size(line)
    assert line not in CHUNK_SIZES


def test_long_lines_are_read_but_not_remembered():
    line = b"0" * 20 + b"a"  # leading zeros: a valid size, longer than MAX_SIZE_DIGITS
    assert remember_chunk_size(line) == 10
    assert line not in CHUNK_SIZES


def test_the_dict_stays_bounded(monkeypatch):
    monkeypatch.setattr(h1_parse, "MAX_KNOWN_SIZES", 3)
    sizes = [remember_chunk_size(b"%x" % n) for n in range(1, 10)]
    assert sizes == list(range(1, 10))
    assert len(CHUNK_SIZES) == 3


class _Pool:
    reuse_idle_s = 30.0

    def _put(self, conn):
        pass

    def _forget(self, conn):
        pass


class _Transport:
    def write(self, data):
        pass

    def abort(self):
        self.aborted = True

    def is_closing(self):
        return False

    def get_extra_info(self, name):
        return None


class _Handler:
    def __init__(self):
        self.body_bytes = b""
        self.failed = None
        self.ended = False

    def head(self, status, headers, now):
        return self.body

    def body(self, data, now):
        self.body_bytes += data
        return 0

    def end(self, now):
        self.ended = True

    def fail(self, kind, message, now):
        self.failed = message


def _read(stream: bytes) -> _Handler:
    from loadgen.client.h1_connection import Connection
    conn = Connection(_Pool())
    conn.connection_made(_Transport())
    handler = _Handler()
    conn.start(b"", handler)
    conn.data_received(stream)
    return handler


HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_a_connection_reads_the_same_body_with_the_sizes_remembered_or_not():
    stream = HEAD + b"3\r\nabc\r\n3\r\ndef\r\nA\r\n0123456789\r\n0\r\n\r\n"
    first = _read(stream)
    assert CHUNK_SIZES  # the sizes were remembered
    second = _read(stream)
    assert first.body_bytes == second.body_bytes == b"abcdef0123456789"
    assert first.ended and second.ended and first.failed is second.failed is None


@pytest.mark.parametrize("bad", [b"0x3", b"+3", b"3_"])
def test_a_size_int_takes_fails_after_good_sizes_were_remembered(bad):
    _read(HEAD + b"3\r\nabc\r\n0\r\n\r\n")
    handler = _read(HEAD + bad + b"\r\nabc\r\n0\r\n\r\n")
    assert handler.failed is not None and "chunk size" in handler.failed
