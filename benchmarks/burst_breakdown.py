"""Where loadgen's client spends per chunk in the burst case, by elimination, in-process, on the fast server's bytes.

    python benchmarks/burst_breakdown.py [--events 128] [--writes-per-read 1] [--responses 300] [--reps 5]
        [--bytecodes]

The reads are the burst server's writes (`fast_sse_server.render_writes`, 4 events a write), `--writes-per-read`
of them joined into one read (a client that falls behind reads several writes at once: 0 joins a whole
response into one read). Each stage adds one layer of loadgen's per-read path to the one before, on the same
reads; `raw` is `benchmarks/raw_reader.py`'s own `RawConnection.stream` driven over the same reads (no socket,
no event loop), the reference. Figures: ns of CPU (time.process_time) per content chunk, the median of `--reps`
rounds, the stages interleaved within each round.

- `framing`: `Connection.data_received`, a body reader that takes the bytes and does nothing;
- `sse`: + `SseParser.feed` on them;
- `json`: + `orjson.loads` of every event (what the raw reader does for the usage event only);
- `state`: + `ChatState.feed` of every event instead (JSON, token counts, checks);
- `recorder`: the real body reader, `StreamRecorder.feed` (SSE, state, per-chunk times and counts);
- `request`: + what each request costs beyond its reads: its `Record`, `finish`, `compact`;
- `kept`: + `CellRecords.keep` of each record (`loadgen.run.chunk_spill`), as the benchmark's cell keeps them.

`--bytecodes` counts instead each stage's bytecodes and Python calls a response (a trace function): exact on any
host, where time is blurred by neighbours and by how the interpreter was built (docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import orjson  # noqa: E402
from fast_sse_server import render_events, render_writes  # noqa: E402
from h1_parse_cost import Pool, Transport  # noqa: E402
from raw_reader import RawConnection  # noqa: E402

from loadgen.client.h1_connection import CONTINUE, Connection  # noqa: E402
from loadgen.client.recorder import StreamRecorder  # noqa: E402
from loadgen.client.sse import SseParser  # noqa: E402
from loadgen.client.stream import StreamState  # noqa: E402
from loadgen.names import Api  # noqa: E402
from loadgen.record import CellKey, Record  # noqa: E402

CELL = CellKey(60, 32)


def reads_of(events: int, writes_per_read: int) -> list[bytes]:
    """The burst server's writes of one response, `writes_per_read` of them a read (0: the whole response)."""
    writes = render_writes(render_events(events, 4), 4)
    step = writes_per_read or len(writes)
    return [b"".join(writes[i:i + step]) for i in range(0, len(writes), step)]


class Handler:
    """A `Connection` handler whose body reader is `body`: a callable, or a `StreamRecorder`, whose `feed` reads
    the body and which reads whole chunks itself, as `h1_sender.StreamHandler` offers it (`chunk_reader`)."""

    __slots__ = ("body", "chunk_reader")

    def __init__(self, body: Callable[[bytes, int], int] | StreamRecorder):
        recorder = body if isinstance(body, StreamRecorder) else None
        self.body = recorder.feed if recorder is not None else body
        self.chunk_reader = recorder

    def head(self, status, headers, now):
        return self.body

    def end(self, now):
        pass

    def fail(self, *args):
        raise SystemExit(f"failed: {args}")


def over_connection(reads: list[bytes], responses: int, body_for: Callable[[], Callable[[bytes, int], int]]) -> float:
    """CPU seconds of `responses` responses through one keep-alive `Connection`, each with a fresh body reader."""
    conn = Connection(Pool())
    conn.connection_made(Transport())
    t0 = time.process_time()
    for _ in range(responses):
        conn.start(b"", Handler(body_for()))
        for data in reads:
            conn.data_received(data)
    return time.process_time() - t0


def framing_body():
    return lambda data, now: CONTINUE


def sse_body():
    feed = SseParser().feed

    def body(data: bytes, now: int) -> int:
        feed(data)
        return CONTINUE
    return body


def json_body():
    feed, loads = SseParser().feed, orjson.loads

    def body(data: bytes, now: int) -> int:
        for event in feed(data):
            if event != b"[DONE]":
                loads(event)
        return CONTINUE
    return body


def state_body():
    parse, state = SseParser().feed, StreamState(api=Api.OPENAI_CHAT)
    feed = state.feed

    def body(data: bytes, now: int) -> int:
        for event in parse(data):
            feed(event)
        return CONTINUE
    return body


def new_record(seq: int = 0) -> Record:
    return Record(run_id="bench", cell=CELL, seq=seq, request_id=f"bench-60-32-{seq}", t_intended_ns=1)


def recorder_body():
    return StreamRecorder(new_record(), Api.OPENAI_CHAT)


def request_run(reads: list[bytes], responses: int, keep: Callable[[Record], object] = Record.compact) -> float:
    """The recorder stage with each request's record made, finished and compacted as a cell keeps it."""
    conn = Connection(Pool())
    conn.connection_made(Transport())
    t0 = time.process_time()
    for seq in range(responses):
        recorder = StreamRecorder(new_record(seq), Api.OPENAI_CHAT)
        conn.start(b"", Handler(recorder))
        for data in reads:
            conn.data_received(data)
        keep(recorder.finish(None, None))
    return time.process_time() - t0


def kept_run(reads: list[bytes], responses: int) -> float:
    """The request stage with each record kept as a cell keeps its measured records (`CellRecords`)."""
    from loadgen.run.chunk_spill import CellRecords
    kept = CellRecords()
    try:
        return request_run(reads, responses, kept.keep)
    finally:
        kept.finish()


class _Reader:
    """The reads of one response as `RawConnection.stream` asks for them (nothing awaits: no loop needed)."""

    def __init__(self, reads: list[bytes]):
        head_end = reads[0].index(b"\r\n\r\n") + 4
        self.head, self.rest = reads[0][:head_end], [reads[0][head_end:], *reads[1:]]
        self.i = 0

    async def readuntil(self, sep: bytes) -> bytes:
        self.i = 0
        return self.head

    async def read(self, n: int) -> bytes:
        self.i += 1
        return self.rest[self.i - 1]


class _Writer:
    def write(self, data: bytes) -> None:
        pass


def raw_run(reads: list[bytes], responses: int) -> float:
    """CPU seconds of the raw reader's `stream` over the same reads."""
    conn = RawConnection(_Reader(reads), _Writer())  # type: ignore[arg-type]
    t0 = time.process_time()
    for _ in range(responses):
        coro = conn.stream(b"")
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:
            raise SystemExit("the raw reader waited")
    return time.process_time() - t0


STAGES: dict[str, Callable[[list[bytes], int], float]] = {
    "raw": raw_run,
    "framing": lambda reads, n: over_connection(reads, n, framing_body),
    "sse": lambda reads, n: over_connection(reads, n, sse_body),
    "json": lambda reads, n: over_connection(reads, n, json_body),
    "state": lambda reads, n: over_connection(reads, n, state_body),
    "recorder": lambda reads, n: over_connection(reads, n, recorder_body),
    "request": request_run,
    "kept": kept_run,
}


def bytecodes_a_response(stage: str, reads: list[bytes], responses: int = 10) -> tuple[float, float, Counter]:
    """(bytecodes, Python calls, bytecodes by function) a response of `stage`, its code warm: every opcode the
    interpreter runs, counted by a trace function (`f_trace_opcodes`). Not time, but exact on any host: work that
    a change removes from the loop or from what each response runs once shows here to the bytecode."""
    STAGES[stage](reads, 20)
    by_function: Counter = Counter()
    calls = 0

    def trace(frame, event, arg):
        nonlocal calls
        if event == "call":
            frame.f_trace_opcodes = True
            calls += 1
        elif event == "opcode":
            by_function[frame.f_code.co_qualname] += 1
        return trace

    sys.settrace(trace)
    try:
        STAGES[stage](reads, responses)
    finally:
        sys.settrace(None)
    return sum(by_function.values()) / responses, calls / responses, by_function


def print_bytecodes(reads: list[bytes], stages: list[str]) -> None:
    print(f"{len(reads)} reads a response; bytecodes and Python calls a response (the functions with most)")
    responses = 10
    for s in stages:
        ops, calls, by_function = bytecodes_a_response(s, reads, responses)
        top = ", ".join(f"{name} {n / responses:.0f}" for name, n in by_function.most_common(3))
        print(f"{s:10s} {ops:8.0f} bytecodes {calls:6.0f} calls   ({top})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=128)
    p.add_argument("--writes-per-read", type=int, default=1, help="server writes joined into one read (0: all)")
    p.add_argument("--responses", type=int, default=300)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--stages", default=",".join(STAGES))
    p.add_argument("--bytecodes", action="store_true",
                   help="count each stage's bytecodes and Python calls a response instead (exact, any host)")
    a = p.parse_args()
    reads = reads_of(a.events, a.writes_per_read)
    stages = a.stages.split(",")
    if a.bytecodes:
        print_bytecodes(reads, stages)
        return
    chunks = a.events * a.responses
    runs: dict[str, list[float]] = {s: [] for s in stages}
    for s in stages:  # unmeasured: each stage's first responses import and warm what it runs (a cell's first ones)
        STAGES[s](reads, 20)
    for _ in range(a.reps):
        for s in stages:
            runs[s].append(STAGES[s](reads, a.responses) / chunks * 1e9)
    print(f"{len(reads)} reads a response, {a.events} content chunks; ns per chunk, median of {a.reps} "
          f"(min-max)")
    raw = statistics.median(runs["raw"]) if "raw" in runs else None
    for s in stages:
        med = statistics.median(runs[s])
        ratio = f"  {med / raw:5.2f}x raw" if raw else ""
        print(f"{s:10s} {med:7.0f}  ({min(runs[s]):.0f}-{max(runs[s]):.0f}){ratio}")


if __name__ == "__main__":
    main()
