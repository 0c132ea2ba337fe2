"""CPU per chunk of the HTTP/1.1 framing alone, in-process: loadgen's `Connection.data_received` beside llhttp
(`httptools.HttpResponseParser.feed_data`, when installed), fed the same chunked SSE stream one read per event.

    python benchmarks/h1_parse_cost.py [--events 128] [--responses 400] [--reps 7]

Best of `--reps` (time.process_time); no socket, no event loop: the cost of the framing and the call into the
body reader, which is what a choice between the two parsers changes (docs/wire.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadgen.client.h1_connection import CONTINUE, Connection  # noqa: E402

EVENT = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nDate: x\r\n"
        b"Server: uvicorn\r\n\r\n")


class Pool:
    reuse_idle_s = 30.0

    def _put(self, conn):
        pass

    def _forget(self, conn):
        pass


class Transport:
    def write(self, data):
        pass

    def abort(self):
        pass

    def is_closing(self):
        return False

    def get_extra_info(self, name):
        return None


class Handler:
    def head(self, status, headers, now):
        return self.body

    def body(self, data, now):
        return CONTINUE

    def end(self, now):
        pass

    def fail(self, *args):
        raise SystemExit(f"failed: {args}")

    on_body = on_message_complete = lambda self, *a: None  # httptools' callbacks


def loadgen_ns(reads: list[bytes], responses: int) -> float:
    t0 = time.process_time()
    for _ in range(responses):
        conn = Connection(Pool())
        conn.connection_made(Transport())
        conn.start(b"", Handler())
        for data in reads:
            conn.data_received(data)
    return time.process_time() - t0


def llhttp_ns(reads: list[bytes], responses: int) -> float:
    import httptools
    t0 = time.process_time()
    for _ in range(responses):
        parser = httptools.HttpResponseParser(Handler())
        for data in reads:
            parser.feed_data(data)
    return time.process_time() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=128)
    p.add_argument("--responses", type=int, default=400)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    reads = [HEAD] + [b"%x\r\n%s\r\n" % (len(EVENT), EVENT)] * a.events + [b"0\r\n\r\n"]
    runs = [("loadgen", loadgen_ns)]
    try:
        import httptools  # noqa: F401
        runs.append(("httptools", llhttp_ns))
    except ImportError:
        print("httptools not installed: loadgen only")
    for name, fn in runs:
        best_s = min(fn(reads, a.responses) for _ in range(a.reps))
        print(f"{name:10s} {best_s / (a.responses * a.events) * 1e9:6.0f} ns per chunk")


if __name__ == "__main__":
    main()
