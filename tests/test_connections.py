"""Keep-alive connections a server closes under the client: never reused, and a request that one of them
swallowed is sent once more on a new connection, with both HTTP clients.

Unit level: the lean pool against a blocking-socket server in a thread (the test decides when it closes);
end to end: the real CLI against the simulator's `--close-after-stream` (llama.cpp's behaviour) and
`--idle-close` (a proxy's), whose truth names every request it dropped on a connection it was closing.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from loadgen.client.config import ClientConfig
from loadgen.client.h1 import Pool
from loadgen.client.h1_sender import Sender
from loadgen.record import CellKey, Record
from tests.conftest import run_loadgen
from tests.faults_util import outputs

pytestmark = pytest.mark.sim  # timed: its races (a request landing in a closing connection's window) must happen

EVENTS = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
          b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"length"}]}\n\n'
          b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
          b"data: [DONE]\n\n")
BODY = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}


def stream_response(headers: str = "Keep-Alive: timeout=5, max=100") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n{headers}\r\n\r\n"
    return head.encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(EVENTS), EVENTS)


class ThreadServer:
    """HTTP/1.1 over blocking sockets, one thread per connection. After each answer: `after` = "keep" (serve
    the next request), "close" (close once `go` is set), "lag" (read and drop whatever comes for `lag_s`,
    then close), "mute" (close on every request without answering)."""

    def __init__(self, after: str, response: bytes | None = None, lag_s: float = 0.3):
        self.after, self.response, self.lag_s = after, response or stream_response(), lag_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.go, self.closed = threading.Event(), threading.Event()
        self.answered = self.dropped = self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while _read_request(conn):
                if self.after == "mute":
                    return
                conn.sendall(self.response)
                self.answered += 1
                if self.after == "close":
                    self.go.wait(10)
                    break
                if self.after == "lag":
                    self._drop_for(conn)
                    break
        self.closed.set()

    def _drop_for(self, conn: socket.socket) -> None:
        end = time.monotonic() + self.lag_s
        while (left := end - time.monotonic()) > 0:
            conn.settimeout(left)
            try:
                data = conn.recv(65536)
            except TimeoutError:
                return
            if not data:
                return
            self.dropped += data.count(b" HTTP/1.1\r\n")

    def stop(self) -> None:
        self.listener.close()


def _read_request(conn: socket.socket) -> bool:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return False
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        data = conn.recv(65536)
        if not data:  # the client went away mid-body (recv would return b"" forever: a thread spinning a core)
            return False
        body += data
    return True


@pytest.fixture
def server_factory():
    made: list[ThreadServer] = []

    def make(*args, **kw) -> ThreadServer:
        made.append(ThreadServer(*args, **kw))
        return made[-1]

    yield make
    for s in made:
        s.go.set()
        s.stop()


def _eventually(condition, timeout_s: float = 5.0) -> bool:
    """The server thread counts after its write returns, which may be after the client has read the answer."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _record(seq: int) -> Record:
    return Record(run_id="t", cell=CellKey(context_tokens=60, concurrency=1), seq=seq, request_id=f"t-{seq}")


def _sender(url: str) -> tuple[Pool, Sender]:
    pool = Pool(url)
    return pool, Sender(pool, ClientConfig(base_url=url, api="openai-chat", idle_timeout_s=10))


def test_pool_never_hands_out_a_connection_whose_eof_the_loop_has_not_read(server_factory):
    """The server's FIN is in the kernel but the event loop has run no callback for it (the loop is held):
    the pool still sees it and opens a new connection."""
    server = server_factory("close")

    async def main():
        pool, sender = _sender(server.url)
        first = await sender(BODY, _record(0))
        assert first.outcome == "ok", first.error
        old = pool.idle[-1]
        server.go.set()
        assert server.closed.wait(5)
        time.sleep(0.05)  # holds the loop: the FIN has arrived, connection_lost has not run
        assert not old.lost
        conn = await pool.acquire()
        assert conn is not old and conn.served == 0
        assert old.transport.is_closing()
        pool.close()

    asyncio.run(main())


def test_pool_drops_a_connection_the_loop_saw_closed(server_factory):
    server = server_factory("close")

    async def main():
        pool, sender = _sender(server.url)
        assert (await sender(BODY, _record(0))).outcome == "ok"
        old = pool.idle[-1]
        server.go.set()
        for _ in range(200):
            if old.lost:
                break
            await asyncio.sleep(0.01)
        assert old.lost
        assert await pool.acquire() is not old
        pool.close()

    asyncio.run(main())


@pytest.mark.parametrize(("headers", "pooled", "reuse_idle_s"), [
    ("Connection: close", False, None),
    ("Keep-Alive: timeout=5, max=1", False, None),
    ("Keep-Alive: timeout=1, max=50", True, 0.8),
    ("Keep-Alive: timeout=5, max=100", True, 4.0),
])
def test_connection_close_and_keep_alive_limits_are_honoured(server_factory, headers, pooled, reuse_idle_s):
    server = server_factory("keep", response=stream_response(headers))

    async def main():
        pool, sender = _sender(server.url)
        assert (await sender(BODY, _record(0))).outcome == "ok"
        assert bool(pool.idle) == pooled
        if pooled:
            assert pool.idle[-1].reuse_idle_s == pytest.approx(reuse_idle_s)
        pool.close()

    asyncio.run(main())


def test_a_request_swallowed_by_a_closing_connection_is_sent_again_on_a_new_one(server_factory):
    """The server answers, then drops what arrives for 0.3 s and closes: every request after the first
    lands on a connection it is closing, fails before any byte of an answer, and is sent once more."""
    server = server_factory("lag")

    async def main():
        pool, sender = _sender(server.url)
        recs = [await sender(BODY, _record(i)) for i in range(3)]
        pool.close()
        return recs

    recs = asyncio.run(main())
    assert [r.outcome for r in recs] == ["ok"] * 3, [r.error for r in recs]
    assert [r.retried_on_new_connection for r in recs] == [0, 1, 1]
    assert _eventually(lambda: (server.dropped, server.answered) == (2, 3)), (server.dropped, server.answered)
    assert all(r.t_first_byte_ns > r.t_sent_ns for r in recs)


def test_a_request_that_fails_on_a_new_connection_is_a_failure(server_factory):
    server = server_factory("mute")

    async def main():
        pool, sender = _sender(server.url)
        rec = await sender(BODY, _record(0))
        pool.close()
        return rec

    rec = asyncio.run(main())
    assert rec.outcome == "connection_error" and rec.retried_on_new_connection == 0


# ---- end to end: the real CLI against the simulator ---------------------------------------------------------
LAGGED = ("--close-after-stream", "--close-lag", "0.02")
SERVERS = {
    "close-after-stream": ("--close-after-stream",),  # llama-server: the FIN right behind the last chunk
    "close-after-stream-lagged": LAGGED,  # the FIN 20 ms later: every reuse of the connection is swallowed
    "idle-close": ("--idle-close", "0.05", "--close-lag", "0.1"),  # a proxy; its FIN 0.1 s after it stopped serving
}


def _run(sim, tmp_path: Path, client: str, *load: str) -> tuple[dict, list[dict]]:
    out = tmp_path / f"{client}.json"
    p = run_loadgen("--url", sim.url, "--contexts", "60", "--max-tokens", "16", "--http-client", client,
                    "--out", str(out), *load)
    assert p.returncode == 0, p.stderr[-3000:]
    return outputs(out)


def _check_accounted(doc: dict, records: list[dict], truth: list[dict], every_drop_logged: bool) -> int:
    """No request failed (so no slot backed off: slots pause only after a connection error), each cell's
    `retried_on_new_connection` is the sum over its records, the server served every request exactly once,
    and the requests it dropped on a closing connection are retried ones (all of them when every drop was
    logged, i.e. the FIN came after a lag). Returns the measured retries."""
    assert [r["outcome"] for r in records if r["outcome"] != "ok"] == []
    measured = 0
    for cell in doc["cells"]:
        assert cell["requests"]["failed"] == 0
        # the drift check's control measurement of a cell has a run id of its own and its own count
        mine = [r for r in records if r["phase"] == "measure" and r["cell"]["concurrency"] == cell["concurrency"]
                and r["cell"].get("request_rate") == cell.get("request_rate") and r["run_id"] == cell["run_id"]]
        assert cell["retried_on_new_connection"] == sum(r["retried_on_new_connection"] for r in mine)
        measured += cell["retried_on_new_connection"]
    by_id = {r["request_id"]: r for r in records}
    served = [row["rid"] for row in truth if row["outcome"] == "ok" and row["rid"] in by_id]
    assert sorted(served) == sorted(by_id)
    dropped = sorted(row["rid"] for row in truth if row["outcome"] == "dropped_by_close" and row["rid"] in by_id)
    retried = sorted(rid for rid, r in by_id.items() if r["retried_on_new_connection"])
    assert all(r["retried_on_new_connection"] in (0, 1) for r in records)
    if every_drop_logged:
        assert dropped == retried
    else:
        assert set(dropped) <= set(retried)
    return measured


@pytest.mark.parametrize("client", ["h1", "aiohttp"])
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_closed_loop_against_a_server_that_closes_connections(sim_factory, tmp_path, client, server):
    sim = sim_factory("--speed", "4", *SERVERS[server])
    doc, records = _run(sim, tmp_path, client, "--concurrency", "1,4", "--requests-per-cell", "8")
    measured = _check_accounted(doc, records, sim.truth_rows(), every_drop_logged="--close-lag" in SERVERS[server])
    if SERVERS[server] == LAGGED:
        assert measured >= 1  # the race happened, and cost no request


@pytest.mark.parametrize("client", ["h1", "aiohttp"])
def test_requests_racing_a_proxys_idle_close_are_sent_again(sim_factory, tmp_path, client):
    """Open loop, one request every 0.1 s: a connection sits idle past the proxy's 0.05 s before the next
    request, which lands while the proxy is closing it."""
    sim = sim_factory("--speed", "4", *SERVERS["idle-close"])
    doc, records = _run(sim, tmp_path, client, "--request-rate", "10", "--arrival", "constant",
                        "--requests-per-cell", "10")
    assert _check_accounted(doc, records, sim.truth_rows(), every_drop_logged=True) >= 1
