"""A fast OpenAI-chat SSE server for client benchmarks: pre-rendered responses over raw asyncio protocols.

    python benchmarks/fast_sse_server.py --port 0 [--mode burst|paced] [--events 128] [--tokens-per-event 4]
        [--events-per-write 4] [--step-ms 25] [--cpu N] [--procs K]

prints `fast-sse ready on http://127.0.0.1:PORT ...` and serves until SIGINT/SIGTERM.

It costs the server as little as possible per event, so that the client under test is what limits:
every response is rendered once at start-up (HTTP/1.1 chunked, one HTTP chunk per SSE event, as aiohttp and
uvicorn servers write them), and a stream is only a sequence of `transport.write` calls. As a real server's, each
stream has its own `id` (and `created` moves on): `STREAM_IDS` renderings, taken in turn.

- `burst`: each stream writes `--events-per-write` events per `write` (one TCP segment each: TCP_NODELAY), one
  write per event-loop iteration per stream, as fast as the client takes them (flow control honoured).
- `paced`: one event per `write`, like a real server; every `--step-ms` all active streams write their next
  event (SGLang emits a whole batch's outputs at each decode step).

The stream is what loadgen's client expects of SGLang with `continuous_usage_stats`: a role chunk, content
chunks carrying running usage, the `sglext` speculative details, the final usage chunk and `[DONE]`.
Besides the streaming POST it answers `GET /v1/models`, non-streaming POSTs (usage only; prompt tokens = body
bytes / 4) and 404 elsewhere, which is all `loadgen --url` needs. `--procs K` forks K server processes on one
port (SO_REUSEPORT), each pinned to its own core, for multi-worker client benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

import orjson

MODEL = "fast-sse"
STREAM_IDS = 64  # renderings of a response, each with its own id


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def render_events(n_events: int, tokens_per_event: int, prompt_tokens: int = 60, stream: int = 0) -> list[bytes]:
    """The SSE events of one chat stream: role, `n_events` content chunks, spec details, usage, [DONE]; the
    stream's `id` and `created` follow from its number."""
    base = {"id": f"fast-{stream:016x}", "object": "chat.completion.chunk", "created": 1700000000 + stream // 16,
            "model": MODEL}

    def usage(ct: int) -> dict:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": ct, "total_tokens": prompt_tokens + ct,
                "prompt_tokens_details": None, "reasoning_tokens": 0}

    events = [sse(base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "logprobs": None, "finish_reason": None, "matched_stop": None}]})]
    for i in range(n_events):
        ct = (i + 1) * tokens_per_event
        finish = "length" if i == n_events - 1 else None
        text = "".join(f" w{(i * tokens_per_event + j) % 997}" for j in range(tokens_per_event))
        events.append(sse(base | {"choices": [{"index": 0, "delta": {"content": text}, "logprobs": None,
                                               "finish_reason": finish, "matched_stop": None}],
                                  "usage": usage(ct)}))
    total = n_events * tokens_per_event
    verify = n_events - 1
    events.append(sse(base | {"choices": [], "sglext": {"spec_tokens_details": {
        "spec_accept_length": total / max(verify, 1), "spec_verify_ct": verify}}}))
    events.append(sse(base | {"choices": [], "usage": usage(total)}))
    events.append(sse(b"[DONE]"))
    return events


def http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")
END = b"0\r\n\r\n"


def render_writes(events: list[bytes], per_write: int) -> list[bytes]:
    """Group the framed events into writes of `per_write` events (the head joins the first write, the end
    the last)."""
    framed = [http_chunk(e) for e in events]
    writes = [b"".join(framed[i:i + per_write]) for i in range(0, len(framed), per_write)]
    writes[0] = HEAD + writes[0]
    writes[-1] += END
    return writes


def plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s"
            % (status.encode(), ctype, len(body), body))


MODELS = plain("200 OK", orjson.dumps({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                     "max_model_len": 1_000_000}]}))
NOT_FOUND = plain("404 Not Found", b'{"error":"not found"}')


class Server:
    def __init__(self, mode: str, streams: list[list[bytes]], step_s: float):
        self.mode = mode
        self.streams = streams  # each stream's writes, one rendering a stream id
        self.started = 0
        self.step_s = step_s
        self.active: set[Conn] = set()
        self.loop = asyncio.get_running_loop()
        self._ticking = False

    def start_stream(self, conn: "Conn") -> None:
        conn.i, conn.writes = 0, self.streams[self.started % len(self.streams)]
        self.started += 1
        if self.mode == "burst":
            conn.pump()
            return
        conn.write_next()  # head + role event at once, then one event per step
        self.active.add(conn)
        if not self._ticking:
            self._ticking = True
            self._next = self.loop.time() + self.step_s
            self.loop.call_at(self._next, self._tick)

    def _tick(self) -> None:
        for conn in list(self.active):
            if conn.write_next():
                self.active.discard(conn)
        if not self.active:
            self._ticking = False
            return
        # absolute schedule: a late tick does not shift the following ones
        self._next = max(self._next + self.step_s, self.loop.time())
        self.loop.call_at(self._next, self._tick)


class Conn(asyncio.Protocol):
    def __init__(self, server: Server):
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.i = -1  # index of the next write of the current stream; -1 = not streaming
        self.writes: list[bytes] = []  # the current stream's
        self.paused = False
        self.queued: list[bytes] = []

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.server.active.discard(self)
        self.i = -1

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.i >= 0 and self.server.mode == "burst":
            self.pump()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            self.request(head.split(b" ", 2), body)

    def request(self, line: list[bytes], body: bytes) -> None:
        method, path = line[0], line[1]
        if method == b"GET":
            self.respond(MODELS if path == b"/v1/models" else NOT_FOUND)
        elif method == b"POST" and path in (b"/v1/chat/completions", b"/v1/completions", b"/generate"):
            if b'"stream":true' in body or b'"stream": true' in body:
                if self.i >= 0:
                    self.queued.append(body)  # pipelined: serve after the current stream
                else:
                    self.server.start_stream(self)
            else:
                pt = max(1, len(body) // 4)
                self.respond(plain("200 OK", orjson.dumps({
                    "id": "fast", "object": "chat.completion", "model": MODEL, "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": " w"},
                         "finish_reason": "length"}],
                    "usage": {"prompt_tokens": pt, "completion_tokens": 1, "total_tokens": pt + 1}})))
        else:
            self.respond(NOT_FOUND)

    def respond(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def write_next(self) -> bool:
        """Write the stream's next piece; True when the stream is over."""
        t = self.transport
        if self.i < 0 or t is None or t.is_closing():
            return True
        t.write(self.writes[self.i])
        self.i += 1
        if self.i < len(self.writes):
            return False
        self.i = -1
        if self.queued:
            self.queued.pop(0)
            self.server.start_stream(self)
            return self.server.mode == "paced"
        return True

    def pump(self) -> None:
        if self.paused or self.i < 0:
            return
        if not self.write_next():
            # one write per stream per loop iteration: streams interleave and each write is its own segment
            self.server.loop.call_soon(self.pump)


def pin(cpu: int | None) -> str:
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return "unpinned"
    try:
        os.sched_setaffinity(0, {cpu})
        return f"cpu {cpu}"
    except OSError as exc:
        return f"unpinned ({exc.strerror})"


def default_cpu() -> int | None:
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if len(cpus) > 1 else None


async def serve(args, sock: socket.socket, pinned: str) -> None:
    per_write = args.events_per_write if args.mode == "burst" else 1
    streams = [render_writes(render_events(args.events, args.tokens_per_event, stream=k), per_write)
               for k in range(STREAM_IDS)]
    server = Server(args.mode, streams, args.step_ms / 1000.0)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Conn(server), sock=sock, backlog=4096)
    if args.announce:
        port = sock.getsockname()[1]
        print(f"fast-sse ready on http://127.0.0.1:{port} (mode={args.mode} events={args.events} "
              f"tokens/event={args.tokens_per_event} events/write={per_write} step={args.step_ms:g}ms "
              f"procs={args.procs} {pinned})", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    srv.close()


def listen(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def raise_fd_limit() -> None:
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--mode", choices=("burst", "paced"), default="burst")
    p.add_argument("--events", type=int, default=128, help="content events per response (default 128)")
    p.add_argument("--tokens-per-event", type=int, default=4, help="tokens per content event (default 4)")
    p.add_argument("--events-per-write", type=int, default=4, help="burst mode: events per write (default 4)")
    p.add_argument("--step-ms", type=float, default=25.0, help="paced mode: step interval (default 25 ms)")
    p.add_argument("--cpu", type=int, help="pin to this core (default: the last allowed core when >1)")
    p.add_argument("--procs", type=int, default=1, help="server processes on one port (SO_REUSEPORT)")
    p.add_argument("--cpus", help="with --procs: comma list of cores, one per process")
    args = p.parse_args(argv)
    raise_fd_limit()
    sock = listen(args.host, args.port, args.procs > 1)
    port = sock.getsockname()[1]
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else None
    children = []
    for k in range(1, args.procs):
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            child = listen(args.host, port, True)
            sock.close()
            _run(args, child, pin(cpus[k % len(cpus)] if cpus else None), announce=False)
            os._exit(0)
        children.append(pid)
    cpu = cpus[0] if cpus else (args.cpu if args.cpu is not None else default_cpu())
    try:
        _run(args, sock, pin(cpu), announce=True)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
    return 0


def _die_with_parent() -> None:
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: no orphaned servers
    except (OSError, AttributeError):
        pass


def _run(args, sock: socket.socket, pinned: str, announce: bool) -> None:
    args.announce = announce
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args, sock, pinned))


if __name__ == "__main__":
    sys.exit(main())
